#!/usr/bin/env bash
# Elastic jobs across four hosts (e2e_hosts.sh): the coordinator and s3rver on
# host 0, agents node-1, node-2 and node-3 on hosts 1 to 3, one GPU slot each.
# A fixed 3-node athanor-train job runs uninterrupted as the reference. Then an
# elastic job (--nodes 2:3, the same --global-batch and training flags) starts
# on all three; once it has committed a checkpoint, node-3's agent is killed
# (SIGKILL; its rank is left behind, an orphan that the agent's next start
# ends). The coordinator must mark node-3 DOWN after its heartbeat timeout and
# shrink the job: attempt 1 "shrunk", attempt 2 on node-1 and node-2, no
# restart used, resuming from a committed checkpoint. node-3's agent then
# starts again, and the job must grow back at its next checkpoint: attempt 2
# "grown", attempt 3 on all three. The job must succeed with final weights
# within 1e-5 of the reference's (the world size changes the order of the
# sums, nothing else).
#
# It prints, for each run: the detection time (the kill to the coordinator's
# "DOWN", from its log), the re-rendezvous time (DOWN to rank 0 of attempt 2
# finishing a step past its resume), their total, and the grow time (the
# agent's restart to rank 0 of attempt 3 finishing a step). With
# ATHANOR_ELASTIC_RUNS=R (default 1) a fresh elastic job goes through the
# shrink and the grow R times, and the min/median/max of each figure follow.
# With ATHANOR_ELASTIC_KILL=host (namespace hosts only), every process on
# node-3's host is killed instead (agent, checkpoint service and rank), as
# when the machine dies: the surviving ranks then see their peer gone (and
# exit) before the heartbeat timeout does, and the job must shrink all the same.
#
# Usage: elastic_e2e_test.sh BIN_DIR SOURCE_DIR
# The daemons' logs are kept (the folder is printed) when the test fails, or
# always with ATHANOR_E2E_KEEP_LOGS=1.
set -u
bin_dir=${1:?usage: elastic_e2e_test.sh BIN_DIR SOURCE_DIR}
src_dir=${2:?usage: elastic_e2e_test.sh BIN_DIR SOURCE_DIR}
runs=${ATHANOR_ELASTIC_RUNS:-1}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "FAIL: ATHANOR_ELASTIC_RUNS must be a count >= 1, not '$runs'"; exit 1; }
kill_mode=${ATHANOR_ELASTIC_KILL:-agent}
case $kill_mode in
  agent | host) ;;
  *) echo "FAIL: ATHANOR_ELASTIC_KILL must be agent or host, not '$kill_mode'"; exit 1 ;;
esac
for b in athanor athanor-coordinator athanor-agent athanor-train; do
  [ -x "$bin_dir/$b" ] || { echo "FAIL: $bin_dir/$b is missing"; exit 1; }
done
s3rver_js="$src_dir/tests/s3rver/node_modules/s3rver/bin/s3rver.js"
[ -f "$s3rver_js" ] || { echo "FAIL: $s3rver_js is missing (scripts/install-test-tools runs npm ci)"; exit 1; }
command -v node > /dev/null || { echo "FAIL: node is missing (scripts/install-test-tools)"; exit 1; }

. "$(dirname "$0")/e2e_hosts.sh"
make_hosts 4
[ "$kill_mode" = agent ] || [ "$netns_mode" = 1 ] ||
  { echo "FAIL: ATHANOR_ELASTIC_KILL=host needs namespace hosts"; exit 1; }
work=$(mktemp -d)
chmod 755 "$work"
mkdir -p "$work/out" && chmod 1777 "$work/out"  # sandboxed ranks write their weights here
# On exit, after the agents' SIGTERM (first in host_cleanups), whatever still
# runs on a namespace host ends: it is this test's, such as the rank that
# node-3's killed agent left behind when the test stops before the agent's
# restart. The /dev/shm staging folders that a killed agent's checkpoint
# service leaves go too.
sweep_hosts() {
  local ns
  for ns in "${host_ns[@]}"; do ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null; done
  cat "$work"/node-*/checkpoint-service.log 2> /dev/null | grep -o 'staging in /dev/shm/athanor-checkpoint-[^ ]*' |
    sort -u | while read -r _ _ dir; do rm -rf "$dir"; done
}
host_cleanups+=(sweep_hosts reap_node3 "rm -rf '$work'")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
keep_logs() {
  local keep
  keep=$(mktemp -d /tmp/athanor-e2e-logs.XXXXXX)
  cp "$work"/*.log "$keep"/ 2> /dev/null
  cp -r "$work"/node-* "$keep"/ 2> /dev/null
  echo "logs kept in $keep"
}
die() {
  echo "FAIL: $*"
  [ -z "${job:-}" ] || cli job "$job" 2> /dev/null | sed 's/^/  /'
  keep_logs
  tail -n 30 "$work/coordinator.log" "$work"/agent-*.log 2> /dev/null | cut -c1-300
  exit 1
}
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')" 2> /dev/null || echo "?"; }  # secs FROM TO

# The watchdog: every wait below has its own deadline and every CLI call a
# timeout, so this only catches what slips past them; it ends the test (logs
# kept, namespaces removed) before ctest's TIMEOUT would kill it uncleaned.
budget=$((120 + 120 * runs))
trap 'die "watchdog: the test ran past ${budget}s"' USR1
(sleep "$budget" && kill -USR1 $$) > /dev/null 2>&1 &  # sleep override: the watchdog's deadline, not a wait for a condition
watchdog_pid=$!
host_cleanups+=("pkill -P $watchdog_pid sleep 2> /dev/null; kill $watchdog_pid 2> /dev/null")

# ---------------------------------------------------------------- daemons
port_c=$(free_port_on 0)
port_s=$(free_port_on 0)
port_m=$(free_port_on 0)  # MASTER_PORTs from here (others' clusters use 29500+ on loopback)
coordinator="${host_addr[0]}:$port_c"
bucket=e2e
# Secure, as in production (docs/security.md): mutual TLS between the
# coordinator and the agents, the CLI with the CA and the admin token, the
# store's credentials set for the tenant and given to its ranks only.
store="s3://$bucket/run?endpoint=http://${host_addr[0]}:$port_s"
secure_cli 30 node-1 node-2 node-3

mkdir -p "$work/s3"
spawn_on_host 0 "$work/s3rver.log" node --openssl-legacy-provider "$s3rver_js" -d "$work/s3" \
  -a "${host_addr[0]}" -p "$port_s" --silent --configure-bucket "$bucket"
# A lost node is noticed after 3 s without a heartbeat (agents send one a
# second); commits are polled often, so that a grow follows its checkpoint.
spawn_on_host 0 "$work/coordinator.log" "$bin_dir/athanor-coordinator" --listen "$coordinator" \
  --state "$work/state.db" --master-port-range "$port_m-$((port_m + 50))" --min-run-time-s 0 \
  --checkpoint-poll-s 0.2 --heartbeat-timeout-s 3 --tls-dir "$work/tls" \
  --allow-store-endpoint "http://${host_addr[0]}:$port_s"
sandbox=(--no-sandbox)
if [ "$(id -u)" = 0 ]; then
  (umask 077; od -An -N24 -tx1 /dev/urandom | tr -d ' \n' > "$work/cluster.key")
  sandbox=(--rendezvous-key-file "$work/cluster.key" --sandbox-shared-dir "$work/out"
           --sandbox-shared-dir "$bin_dir")
fi
declare -A agent_pid
spawn_agent() {  # spawn_agent HOST_INDEX: agent node-HOST_INDEX on that host
  local node="node-$1"
  mkdir -p "$work/$node"
  spawn_on_host "$1" "$work/agent-$node.log" "$bin_dir/athanor-agent" --coordinator "$coordinator" \
    --name "$node" --gpus 1 --host "${host_addr[$1]}" --listen "${host_addr[$1]}:0" \
    --work-dir "$work/$node" --tls-dir "$work/tls" "${sandbox[@]}"
}
start_agent() {  # start_agent HOST_INDEX
  local node="node-$1"
  spawn_agent "$1"
  agent_pid[$node]=$spawned_pid
  # On exit: SIGTERM first, so that the agent ends its ranks (it is not this
  # shell's child: its end is polled, for at most 5 s).
  host_cleanups=("kill -TERM $spawned_pid 2> /dev/null; for _ in \$(seq 50); do kill -0 $spawned_pid 2> /dev/null || break; sleep 0.1; done" "${host_cleanups[@]}")  # sleep override: see above
}
for i in 1 2 3; do start_agent "$i"; done
# On exit, when node-3's agent was killed and not started again (the test
# stopped in between): the cgroups and /dev/shm folders of its sandboxes are
# left. An agent started on the same work dir removes them before anything
# else (once it logs how ranks run); it is stopped then.
node3_lost=0
reap_node3() {
  [ "$node3_lost" = 1 ] || return 0
  local started i
  started=$(grep -Ec "ranks sandboxed|--no-sandbox:" "$work/agent-node-3.log")
  spawn_agent 3
  for ((i = 0; i < 100; i++)); do
    [ "$(grep -Ec "ranks sandboxed|--no-sandbox:" "$work/agent-node-3.log")" -gt "$started" ] && break
    sleep 0.1  # sleep override: the agent is not this shell's child, with nothing to wait on
  done
  kill -TERM "$spawned_pid"
  for ((i = 0; i < 50; i++)); do
    kill -0 "$spawned_pid" 2> /dev/null || break
    sleep 0.1  # sleep override: as above
  done
}

# wait_for DESCRIPTION TIMEOUT_S CMD...: polls CMD (a file read or one CLI
# round trip) every $poll_s until it succeeds; dies at the deadline.
wait_for() {
  local what=$1 limit=$2 t0
  shift 2
  t0=$(date +%s)
  until "$@"; do
    [ $(( $(date +%s) - t0 )) -le "$limit" ] || die "timed out after ${limit}s waiting for $what"
    sleep "$poll_s"  # sleep override: the daemons and ranks are other processes, with nothing to wait on
  done
}
poll_s=0.2
nodes_up() { [ "$(cli nodes 2> /dev/null | grep -c ' UP ')" = "$1" ]; }
wait_for "the three agents to register" 60 nodes_up 3
(umask 077; printf 'access_key=S3RVER\nsecret_key=S3RVER\n' > "$work/e2e.credentials")
cli admin credentials set e2e --file "$work/e2e.credentials" > /dev/null || die "credentials set"
grep -q "S3rver listening" "$work/s3rver.log" || wait_for "s3rver" 30 grep -q "S3rver listening" "$work/s3rver.log"

# ---------------------------------------------------------------- the jobs
# fp32, so that only the order of the sums differs between world sizes. A
# global batch of 96 samples a step is two micro-batches of 16 per rank on
# three nodes and three on two.
global_batch=96
steps=800
every=50
train=("$bin_dir/athanor-train" --data /usr/share/common-licenses/GPL-3 --context 16 --embed 32
       --hidden 1024 --micro-batch 16 --optimizer sgd --lr 0.05 --seed 11
       --steps "$steps" --checkpoint-every "$every" --timeout-s 30)
submit() { cli submit --tenant e2e "$@" | head -n 1; }

# The job's fields, read by poll: state attempt committed restarts, and
# per attempt (spans[i] for attempt i+1) "COUNT NODES OUTCOME STEPS_LOST",
# NODES joined by "+". One Python process reads every `athanor job --json`
# (made one line) and answers with one line: a poll starts the CLI only.
coproc job_reader {
  exec python3 -u -c '
import json, sys
for line in sys.stdin:
    try:
        j = json.loads(line)
    except ValueError:
        print("?|0|-1|0|")
        continue
    spans = ["%d %s %s %s" % (len(a.get("nodes", [])), "+".join(a.get("nodes", [])) or "-",
                              a.get("outcome") or "-", a.get("steps_lost", 0))
             for a in j.get("attempts", [])]
    print("|".join([j.get("state", "?").replace("JOB_", ""), str(j.get("attempt", 0)),
                    str(j.get("committed_step", -1)), str(j.get("restarts", 0))] + spans))'
}
host_cleanups+=("kill $job_reader_PID 2> /dev/null")
poll() {  # poll JOB: sets state attempt committed restarts spans[]
  local j line
  j=$(cli job "$1" --json 2> /dev/null) || return 1
  printf '%s\n' "${j//$'\n'/ }" >&"${job_reader[1]}"
  IFS= read -r -t 30 line <&"${job_reader[0]}" || die "the JSON reader did not answer"
  IFS='|' read -r state attempt committed restarts rest <<< "$line"
  IFS='|' read -ra spans <<< "$rest"
}
span() {  # span ATTEMPT FIELD (0 count, 1 nodes, 2 outcome, 3 steps lost) from the last poll
  local f
  read -ra f <<< "${spans[$(($1 - 1))]:-0 - - 0}"
  echo "${f[$2]}"
}

# Rank 0's log in ATTEMPT of JOB (whichever node it ran on), the newest step
# it finished there (-1: none) and the step it resumed from (-1: none).
rank0_log() { ls "$work"/node-*/jobs/"$1"/attempt-"$2"/rank-0.log 2> /dev/null | head -n 1; }
last_step() {  # last_step JOB ATTEMPT
  local f s
  f=$(rank0_log "$1" "$2")
  [ -n "$f" ] && s=$(grep -o '^{"step":[0-9]*' "$f" | tail -n 1 | grep -o '[0-9]*$')
  echo "${s:--1}"
}
resume_step() {  # resume_step JOB ATTEMPT
  local f s
  f=$(rank0_log "$1" "$2")
  [ -n "$f" ] && s=$(grep -o '^{"event":"resume","step":[0-9]*' "$f" | head -n 1 | grep -o '[0-9]*$')
  echo "${s:--1}"
}
# Whether JOB trains in ATTEMPT: rank 0 finished a step there past the one it
# resumed from. Dies at once when the job has ended (the coordinator's log).
trains_in() {  # trains_in JOB ATTEMPT
  local ended
  ended=$(grep -Eo "job $1 -> (SUCCEEDED|FAILED|CANCELLED).*" "$work/coordinator.log" | head -n 1)
  [ -z "$ended" ] || die "$ended (waiting for attempt $2 to train)"
  [ "$(last_step "$1" "$2")" -gt "$(resume_step "$1" "$2")" ]
}
# Unix time of a coordinator log line ("W0131 12:00:00.123 ...", local time).
log_time() {
  local stamp=${1:1:18}
  date -d "$(date +%Y)-${stamp:0:2}-${stamp:2:2} ${stamp:5}" +%s.%N
}
ended() { poll "$1" && case $state in SUCCEEDED | FAILED | CANCELLED) true ;; *) false ;; esac; }

# MAX_ABS_DIFF MAX_REL_DIFF of two safetensors files of F32 tensors (the
# same names and shapes); the relative one is to the largest |weight|.
weights_diff() {
  python3 - "$1" "$2" << 'EOF'
import json, struct, sys
def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            sys.exit(f"{path}: tensor {name} is {t['dtype']}, not F32")
        b, e = t["data_offsets"]
        out[name] = struct.unpack_from(f"<{(e - b) // 4}f", data, 8 + n + b)
    return out
want, got = load(sys.argv[1]), load(sys.argv[2])
if sorted(want) != sorted(got):
    sys.exit(f"tensor names differ: {sorted(want)} vs {sorted(got)}")
diff = scale = 0.0
for name, w in want.items():
    g = got[name]
    if len(g) != len(w):
        sys.exit(f"tensor {name}: {len(g)} values, want {len(w)}")
    diff = max([diff] + [abs(a - b) for a, b in zip(w, g)])
    scale = max([scale] + [abs(a) for a in w])
print(f"{diff:.3g} {diff / scale if scale else 0:.3g}")
EOF
}

echo "== the uninterrupted reference: 3 nodes, global batch $global_batch, $steps steps"
t_ref=$(now)
job=$(submit --name reference --nodes 3 --gpus-per-node 1 --global-batch "$global_batch" \
      --checkpoint-uri "${store/run/reference}" -- "${train[@]}" --dump-weights "$work/out/reference.safetensors")
[ -n "$job" ] || die "submit printed no job id"
poll_s=1  # a steady run: nothing to time, and the ranks get the CPU
wait_for "the reference to finish" 150 ended "$job"
[ "$state" = SUCCEEDED ] || die "reference: $state"
[ -s "$work/out/reference.safetensors" ] || die "the reference wrote no weights"
echo "reference: $(secs "$t_ref" "$(now)") s"

detect=() rejoin=() shrink=() grow=()
for ((r = 1; r <= runs; r++)); do
  echo "== elastic run $r of $runs: --nodes 2:3"
  t_run=$(now)
  job=$(submit --name "elastic-$r" --nodes 2:3 --gpus-per-node 1 --global-batch "$global_batch" \
        --checkpoint-uri "${store/run/elastic-$r}" -- "${train[@]}" --dump-weights "$work/out/elastic-$r.safetensors")
  [ -n "$job" ] || die "submit printed no job id"

  # On three nodes, with a checkpoint committed: a shrink resumes from it.
  on_three() { poll "$job" && [ "$state" = RUNNING ] && [ "$attempt" = 1 ] && [ "$committed" -ge 0 ]; }
  poll_s=0.5
  wait_for "the elastic job to commit a checkpoint on three nodes" 90 on_three
  [ "$(span 1 0)" = 3 ] || die "attempt 1 runs on $(span 1 1), want all three nodes"
  committed_at=$committed

  # node-3 is lost: its agent is killed (or its whole host). Its DOWN is
  # timed from the coordinator's log; training again, from rank 0's log of
  # attempt 2.
  downs=$(grep -c "node node-3 DOWN" "$work/coordinator.log")
  before=$(last_step "$job" 1)
  t_kill=$(now)
  node3_lost=1
  if [ "$kill_mode" = host ]; then
    ip netns pids "${host_ns[3]}" | xargs -r kill -9 || die "kill -9 of host 3's processes"
    echo "-- killed every process on node-3's host at step $before of attempt 1 (committed $committed_at)"
  else
    kill -9 "${agent_pid[node-3]}" || die "kill -9 agent node-3"
    echo "-- killed node-3's agent at step $before of attempt 1 (committed $committed_at)"
  fi
  more_downs() { [ "$(grep -c "node node-3 DOWN" "$work/coordinator.log")" -gt "$downs" ]; }
  poll_s=0.1  # file reads only, while timing
  wait_for "node-3 to go DOWN" 30 more_downs
  t_down=$(log_time "$(grep "node node-3 DOWN" "$work/coordinator.log" | tail -n 1)")
  wait_for "the job to train again on two nodes" 90 trains_in "$job" 2
  t_back=$(now)
  poll "$job" || die "athanor job $job"
  # node-3 comes back at once (the checks below can wait), and the job must
  # grow at its next checkpoint.
  t_restart=$(now)
  start_agent 3
  node3_lost=0
  detect+=("$(secs "$t_kill" "$t_down")") rejoin+=("$(secs "$t_down" "$t_back")") shrink+=("$(secs "$t_kill" "$t_back")")
  [ "$(span 1 2)" = shrunk ] || fail "attempt 1 ended '$(span 1 2)', want shrunk"
  [ "$restarts" = 0 ] || fail "the shrink used a restart (restarts $restarts)"
  [ "$(span 2 0)" = 2 ] && [[ $(span 2 1) != *node-3* ]] ||
    fail "attempt 2 runs on $(span 2 1), want node-1 and node-2"
  resumed=$(resume_step "$job" 2)
  [ "$resumed" -ge "$committed_at" ] ||
    fail "attempt 2 resumed from step $resumed, behind checkpoint $committed_at committed before the kill"
  # Where the re-rendezvous went: stopping attempt 1 (the survivors' grace,
  # then SIGKILL) and starting attempt 2 (placement to its first step).
  stopped=$(log_time "$(grep "job $job -> PENDING: resizing after attempt 1:" "$work/coordinator.log" | tail -n 1)")
  placed=$(log_time "$(grep "job $job attempt 2 placed on" "$work/coordinator.log" | tail -n 1)")
  echo "   shrunk 3 -> 2: DOWN after ${detect[-1]} s, training again ${rejoin[-1]} s later" \
    "(total ${shrink[-1]} s): attempt 1 ended $(secs "$t_down" "$stopped") s after the DOWN," \
    "attempt 2 trained $(secs "$placed" "$t_back") s after its placement"
  recomputed=$(( $(last_step "$job" 1) + 1 - resumed ))
  echo "   resumed from step $resumed; rank 0 had finished step $(last_step "$job" 1) in attempt 1" \
    "($recomputed steps recomputed); the coordinator's steps_lost: $(span 1 3)"
  # steps_lost is rank 0's step as last reported to the coordinator, past the
  # newest commit, so it never counts more than was recomputed. With the agent
  # killed, the survivors block on the lost rank until they are stopped, so
  # their last report is usually current; with the host killed they fail
  # within the heartbeat interval (a second, tens of steps here). One CI run
  # with the agent killed had the coordinator's last report 45 steps behind
  # rank 0 (steps_lost 3, 49 recomputed), so a shortfall is only noted.
  lost=$(span 1 3)
  if [ "$lost" -gt "$recomputed" ]; then
    fail "the shrink's steps_lost is $lost, more than the $recomputed steps recomputed"
  elif [ $((lost + every / 2)) -lt "$recomputed" ]; then
    echo "NOTE: the shrink's steps_lost is $lost, more than $((every / 2)) short of the $recomputed steps recomputed"
  fi

  echo "-- node-3's agent was restarted once attempt 2 trained"
  wait_for "the job to grow back to three nodes" 90 trains_in "$job" 3
  t_grown=$(now)
  grow+=("$(secs "$t_restart" "$t_grown")")
  poll "$job" || die "athanor job $job"
  [ "$(span 2 2)" = grown ] || fail "attempt 2 ended '$(span 2 2)', want grown"
  [ "$(span 3 0)" = 3 ] || fail "attempt 3 runs on $(span 3 1), want all three nodes"
  [ "$restarts" = 0 ] || fail "the grow used a restart (restarts $restarts)"
  t_up=$(log_time "$(grep "node re-registered: node-3 " "$work/coordinator.log" | tail -n 1)")
  at=$(grep -o "job $job attempt 2 stopping (PENDING): grown at checkpoint step [0-9]*" "$work/coordinator.log" |
       grep -o '[0-9]*$')
  echo "   grown 2 -> 3: training on three ${grow[-1]} s after the agent's restart (node-3 UP after" \
    "$(secs "$t_restart" "$t_up") s, grown at the commit of step ${at:-?}); resumed from step" \
    "$(resume_step "$job" 3), rank 0 had finished step $(last_step "$job" 2) in attempt 2;" \
    "the coordinator's steps_lost: $(span 2 3)"
  # The checkpoint the ranks save on SIGTERM commits after attempt 2 ended;
  # the coordinator credits it only if that happens before attempt 3 reports
  # a step (timing, so a note rather than a failure).
  recomputed=$(( $(last_step "$job" 2) + 1 - $(resume_step "$job" 3) ))
  lost=$(span 2 3)
  [ "$lost" -le $((recomputed > 0 ? recomputed : 0)) ] ||
    echo "NOTE: the grow's steps_lost is $lost, more than the $recomputed step(s) recomputed"

  poll_s=1
  wait_for "the elastic job to finish" 150 ended "$job"
  [ "$state" = SUCCEEDED ] || die "elastic job: $state"
  [ "$attempt" = 3 ] || fail "the elastic job ended in attempt $attempt, want 3 (one shrink, one grow)"
  resizes=$(cli job "$job" | grep -c '^resize:')
  [ "$resizes" = 2 ] || fail "athanor job $job shows $resizes resize: line(s), want 2"
  diffs=$(weights_diff "$work/out/reference.safetensors" "$work/out/elastic-$r.safetensors" 2>&1) ||
    die "cannot compare the final weights: $diffs"
  read -r max_abs max_rel <<< "$diffs"
  python3 -c "import sys; sys.exit(0 if $max_abs <= 1e-5 else 1)" ||
    fail "final weights differ from the reference by up to $max_abs (> 1e-5)"
  echo "   succeeded in $(secs "$t_run" "$(now)") s; final weights vs the reference:" \
    "max |diff| $max_abs (relative $max_rel)"
done

# min/median/max of the figures given (seconds).
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
  m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "min %.1f  median %.1f  max %.1f s", v[1], m, v[NR] }'; }
echo "== summary ($runs run(s), $([ "$netns_mode" = 1 ] && echo "4 namespace hosts" || echo loopback)," \
  "node-3 lost by killing its $kill_mode, heartbeat timeout 3 s, checkpoint every $every steps)"
echo "  detection (kill -> DOWN):           $(stats "${detect[@]}")"
echo "  re-rendezvous (DOWN -> training):   $(stats "${rejoin[@]}")"
echo "  shrink total (kill -> training):    $(stats "${shrink[@]}")"
echo "  grow (agent restart -> training):   $(stats "${grow[@]}")"
if [ "$failures" -gt 0 ]; then
  keep_logs
  echo "$failures failure(s)"
  exit 1
fi
[ -z "${ATHANOR_E2E_KEEP_LOGS:-}" ] || keep_logs
echo PASS
