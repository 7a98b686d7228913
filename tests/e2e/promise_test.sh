#!/usr/bin/env bash
# The whole promise across three hosts (e2e_hosts.sh): the coordinator and
# s3rver on host 0, an agent on each of hosts 1 and 2. A 2-node athanor-train
# job (bf16, accumulation 4, checkpoints every $every steps to s3://) is
# interrupted, in an order drawn from a printed seed, by: a preemption by a
# higher-priority job, SIGKILL of a rank, SIGKILL of an agent (restarted
# later), SIGKILL + restart of the coordinator, and SIGSTOP of a rank (a hang);
# one rank is a 3x straggler for a stretch of steps. The job must finish with
# weights bitwise identical to the same job run uninterrupted; for each
# interruption it prints the steps recomputed (at most the interval), the time
# until training ran again, and for the hang the detection time and suspect.
#
# Usage: promise_test.sh BIN_DIR SOURCE_DIR [SEED]   (or ATHANOR_E2E_SEED=...)
# The daemons' logs are kept (the folder is printed) when the test fails, or
# always with ATHANOR_E2E_KEEP_LOGS=1.
set -u
bin_dir=${1:?usage: promise_test.sh BIN_DIR SOURCE_DIR [SEED]}
src_dir=${2:?usage: promise_test.sh BIN_DIR SOURCE_DIR [SEED]}
seed=${3:-${ATHANOR_E2E_SEED:-$(( $(date +%s%N) / 1000 % 1000000 ))}}
for b in athanor athanor-coordinator athanor-agent athanor-train; do
  [ -x "$bin_dir/$b" ] || { echo "FAIL: $bin_dir/$b is missing"; exit 1; }
done
s3rver_js="$src_dir/tests/s3rver/node_modules/s3rver/bin/s3rver.js"
[ -f "$s3rver_js" ] || { echo "FAIL: $s3rver_js is missing (scripts/install-test-tools runs npm ci)"; exit 1; }
command -v node > /dev/null || { echo "FAIL: node is missing (scripts/install-test-tools)"; exit 1; }
echo "e2e seed: $seed   (replay: ATHANOR_E2E_SEED=$seed $0 $bin_dir $src_dir)"

# The order of the interruptions and the straggler's stretch, from the seed
# (before anything else draws from $RANDOM).
RANDOM=$seed
kinds=(preempt kill-rank kill-agent kill-coordinator hang)
for ((i = ${#kinds[@]} - 1; i > 0; i--)); do
  j=$((RANDOM % (i + 1)))
  t=${kinds[i]} kinds[i]=${kinds[j]} kinds[j]=$t
done
gaps=()
for ((i = 0; i < ${#kinds[@]}; i++)); do gaps+=($((40 + RANDOM % 80))); done
slow_rank=$(( (RANDOM / 7) % 2 ))  # bash RANDOM's low bit repeats across nearby seeds
slow_from=$((1150 + RANDOM % 100))  # mostly after the interruptions (see poll)
kill_rank=$(( (RANDOM / 7) % 2 )) hang_rank_pick=$(( (RANDOM / 7) % 2 )) agent_pick=$((1 + (RANDOM / 7) % 2))
echo "order: ${kinds[*]}; straggler: rank $slow_rank from step $slow_from;" \
  "SIGKILL rank $kill_rank, SIGSTOP rank $hang_rank_pick, SIGKILL agent node-$agent_pick"

. "$(dirname "$0")/e2e_hosts.sh"
make_hosts 3
work=$(mktemp -d)
chmod 755 "$work"
mkdir -p "$work/out" && chmod 1777 "$work/out"  # sandboxed ranks write their weights here
host_cleanups+=("rm -rf '$work'")
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
  keep_logs
  tail -n 30 "$work/coordinator.log" "$work"/agent-*.log 2> /dev/null | cut -c1-300
  exit 1
}
now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$(now) - $1:.1f}')"; }

# ---------------------------------------------------------------- daemons
port_c=$(free_port_on 0)
port_s=$(free_port_on 0)
port_m=$(free_port_on 0)  # MASTER_PORTs from here (others' clusters use 29500+ on loopback)
coordinator="${host_addr[0]}:$port_c"
bucket=e2e
# Secure, as in production (docs/security.md): a cluster CA, mutual TLS
# between the coordinator and the agents, the CLI with the CA and the
# bootstrap admin token. The store's credentials are the tenant's, set by the
# admin and given to its ranks only; the URI carries none.
store="s3://$bucket/run?endpoint=http://${host_addr[0]}:$port_s"
# The CLI is polled often: it runs with host 0's network only (secure_cli).
secure_cli 330 node-1 node-2

mkdir -p "$work/s3"
spawn_on_host 0 "$work/s3rver.log" node --openssl-legacy-provider "$s3rver_js" -d "$work/s3" \
  -a "${host_addr[0]}" -p "$port_s" --silent --configure-bucket "$bucket"
# Straggler ratio 2 against a 3x straggler: on two shared cores a steady
# rank's compute was seen 1.4-1.8x its peer's for three windows in a row
# (CPU contention, not a straggler), above the default 1.3.
start_coordinator() {
  spawn_on_host 0 "$work/coordinator.log" "$bin_dir/athanor-coordinator" --listen "$coordinator" \
    --state "$work/state.db" --master-port-range "$port_m-$((port_m + 50))" --min-run-time-s 0 --checkpoint-poll-s 0.2 --heartbeat-timeout-s 4 \
    --straggler-window-s 3 --straggler-windows 3 --straggler-ratio 2 --log-level debug \
    --hang-timeout-floor-s 5 --tls-dir "$work/tls" --allow-store-endpoint "http://${host_addr[0]}:$port_s"
  coordinator_pid=$spawned_pid
}
sandbox=(--no-sandbox)
if [ "$(id -u)" = 0 ]; then
  (umask 077; od -An -N24 -tx1 /dev/urandom | tr -d ' \n' > "$work/cluster.key")
  sandbox=(--rendezvous-key-file "$work/cluster.key" --sandbox-shared-dir "$work/out"
           --sandbox-shared-dir "$bin_dir")
fi
declare -A agent_pid
start_agent() {  # start_agent HOST_INDEX
  local node="node-$1"
  mkdir -p "$work/$node"
  spawn_on_host "$1" "$work/agent-$node.log" "$bin_dir/athanor-agent" --coordinator "$coordinator" \
    --name "$node" --gpus 1 --host "${host_addr[$1]}" --listen "${host_addr[$1]}:0" \
    --work-dir "$work/$node" --tls-dir "$work/tls" "${sandbox[@]}"
  agent_pid[$node]=$spawned_pid
  # On exit: SIGTERM first, so that the agent ends its ranks.
  host_cleanups=("kill -TERM $spawned_pid 2> /dev/null; for _ in \$(seq 50); do kill -0 $spawned_pid 2> /dev/null || break; sleep 0.1; done" "${host_cleanups[@]}")
}
start_coordinator
start_agent 1
start_agent 2

# wait_for DESCRIPTION TIMEOUT_S CMD...: polls CMD (each run one round trip
# or one file read) until it succeeds; dies at the deadline.
wait_for() {
  local what=$1 limit=$2 t0
  shift 2
  t0=$(date +%s)
  until "$@"; do
    [ $(( $(date +%s) - t0 )) -le "$limit" ] || die "timed out after ${limit}s waiting for $what"
    sleep "$poll_s"
  done
}
poll_s=0.2  # wait_for's interval
nodes_up() { [ "$(cli nodes 2> /dev/null | grep -c ' UP ')" = 2 ]; }
wait_for "both agents to register" 60 nodes_up
# Tenant e2e: its store credentials (s3rver's), and room for the urgent job's priority.
(umask 077; printf 'access_key=S3RVER\nsecret_key=S3RVER\n' > "$work/e2e.credentials")
cli admin credentials set e2e --file "$work/e2e.credentials" > /dev/null || die "credentials set"
cli admin tenant set e2e --max-priority 10 > /dev/null || die "tenant set"
grep -q "S3rver listening" "$work/s3rver.log" || wait_for "s3rver" 30 grep -q "S3rver listening" "$work/s3rver.log"

# ---------------------------------------------------------------- the job
steps=1600
every=80
train=("$bin_dir/athanor-train" --data /usr/share/common-licenses/GPL-3 --context 16 --embed 32
       --hidden 1024 --micro-batch 16 --accum 4 --precision bf16 --optimizer sgd --lr 0.05 --seed 11
       --steps "$steps" --checkpoint-every "$every" --timeout-s 60
       --inject-slow "$slow_rank:$slow_from:$steps:3")
submit() { cli submit --tenant e2e "$@" | head -n 1; }

# State of the job, refreshed by poll: state attempt committed hang_rank
# hang_node; every straggler flag seen goes to $work/stragglers. One Python
# process reads every `athanor job --json` (one line each) and answers with
# one line of fields: a poll starts the CLI and nothing else.
coproc job_fields {
  exec python3 -u -c '
import json, sys
for line in sys.stdin:
    try:
        j = json.loads(line)
    except ValueError:
        print("? 0 -1 0 0 - -")
        continue
    h = j.get("last_hang", {})
    flags = ",".join(str(s.get("rank", 0)) for s in j.get("stragglers", [])) or "-"
    print(j.get("state", "?").replace("JOB_", ""), j.get("attempt", 0), j.get("committed_step", -1),
          h.get("attempt", 0), h.get("rank", 0), h.get("node", "-") or "-", flags)'
}
host_cleanups+=("kill $job_fields_PID 2> /dev/null")
poll() {  # poll JOB
  local j
  j=$(cli job "$1" --json 2> /dev/null) || return 1
  printf '%s\n' "${j//$'\n'/ }" >&"${job_fields[1]}"
  read -r -t 30 state attempt committed hang_attempt hang_rank hang_node flags <&"${job_fields[0]}" ||
    die "the JSON reader did not answer"
  if [ "$flags" != "-" ]; then echo "$(now) $flags" >> "${flag_file:-$work/stragglers}"; fi
  # A blow that falls inside the slow stretch ends its attempt, and the next
  # attempt's straggler windows start over: unless the slow rank was flagged
  # already, its stretch is timed again from where the new attempt reaches it.
  if [ -n "$slow_seen_at" ] && [ "$attempt" != "$slow_attempt" ] &&
     [ -z "$(slow_rank_first_flag "${flag_file:-$work/stragglers}")" ]; then
    slow_seen_at=""
  fi
  if [ -z "$slow_seen_at" ] && [ "$(last_step "$1" "$attempt")" -ge "$slow_from" ]; then
    slow_seen_at=$(now) slow_attempt=$attempt
  fi
}
# When the slow rank was first flagged in FLAG_FILE (nothing: never).
slow_rank_first_flag() {  # FLAG_FILE
  [ -f "$1" ] || return 0
  awk -v r="$slow_rank" '{ n = split($2, f, ","); for (i = 1; i <= n; i++) if (f[i] == r) { print $1; exit } }' "$1"
}
slow_seen_at="" slow_attempt=""
# The newest step rank 0 finished in ATTEMPT (from its log; -1 if none) and
# the step ATTEMPT resumed from (-1 if it did not).
rank0_log() { ls "$work"/node-*/jobs/"$1"/attempt-"$2"/rank-0.log 2> /dev/null | head -n 1; }
last_step() {
  local f
  f=$(rank0_log "$1" "$2")
  [ -n "$f" ] || { echo -1; return; }
  local s
  s=$(grep -o '^{"step":[0-9]*' "$f" | tail -n 1 | grep -o '[0-9]*$')
  echo "${s:--1}"
}
resume_step() {
  local f
  f=$(rank0_log "$1" "$2")
  [ -n "$f" ] || { echo -1; return; }
  local s
  s=$(grep -o '^{"event":"resume","step":[0-9]*' "$f" | head -n 1 | grep -o '[0-9]*$')
  echo "${s:--1}"
}
rank_pid() {  # rank_pid JOB ATTEMPT RANK
  grep -ho "started job $1 attempt $2 rank $3 pid [0-9]*" "$work"/agent-node-*.log | tail -n 1 |
    awk '{print $NF}'
}
rank_node() {  # rank_node JOB ATTEMPT RANK
  grep -l "started job $1 attempt $2 rank $3 pid" "$work"/agent-node-*.log | tail -n 1 |
    sed 's/.*agent-\(node-[0-9]*\)\.log/\1/'
}

echo "== the uninterrupted reference run"
t_ref=$(now)
ref=$(submit --name reference --nodes 2 --gpus-per-node 1 --checkpoint-uri "${store/run/ref}" -- \
      "${train[@]}" --dump-weights "$work/out/reference.safetensors")
[ -n "$ref" ] || die "submit printed no job id"
# Polled like the interrupted run, so that its straggler flags are seen and
# printed too (the interrupted run's are checked below).
flag_file="$work/reference-stragglers"
: > "$flag_file"
reference_done() { poll "$ref" && case $state in SUCCEEDED | FAILED | CANCELLED) true ;; *) false ;; esac; }
poll_s=1  # a steady run: nothing to time closely, and the ranks get the CPU
wait_for "the reference run to finish" 240 reference_done
poll_s=0.2
[ "$state" = SUCCEEDED ] || die "reference: $state ($(cli job "$ref" | grep reason))"
echo "reference run: $(elapsed "$t_ref") s"
ref_flagged=$(awk '{print $2}' "$flag_file" | tr ',' '\n' | sort -u | tr '\n' ' ')
# A steady rank is never flagged, in either run: neither in what `athanor
# job` showed nor in any window the coordinator closed (its debug log).
steady_flagged_in_log() {  # JOB
  grep "straggler window of job $1 attempt" "$work/coordinator.log" | grep -q "rank $((1 - slow_rank)): [^;]*FLAGGED"
}
case " $ref_flagged " in
  *" $((1 - slow_rank)) "*) fail "reference run: rank $((1 - slow_rank)) (never slow) was flagged a straggler" ;;
  *) ! steady_flagged_in_log "$ref" ||
       fail "reference run: rank $((1 - slow_rank)) (never slow) was flagged in a window (coordinator.log)" ;;
esac
flag_file="$work/stragglers"
slow_seen_at="" slow_attempt=""
: > "$work/stragglers"

echo "== the interrupted run"
job=$(submit --name promise --nodes 2 --gpus-per-node 1 --preemptible --grace 30s \
      --max-restarts 10 --hang-timeout 5s --checkpoint-uri "$store" -- \
      "${train[@]}" --dump-weights "$work/out/interrupted.safetensors")
[ -n "$job" ] || die "submit printed no job id"

running_in() {  # the job runs attempt >= $1 and rank 0 finished a step past $2 in it
  poll "$job" || return 1
  [ "$state" = RUNNING ] && [ "$attempt" -ge "$1" ] && [ "$(last_step "$job" "$attempt")" -gt "$2" ]
}
hang_seen() { poll "$job" && [ "$hang_attempt" -gt 0 ]; }
# The moment to interrupt: past MINSTEP in attempt >= A, with a checkpoint
# committed within the last interval (the promise is about committed
# checkpoints; one still being written when the blow falls is not yet one).
ready() {
  running_in "$1" "$2" || return 1
  local s
  s=$(last_step "$job" "$attempt")
  [ "$committed" -ge 0 ] && [ $((s + 1 - committed)) -le "$every" ]
}
report=()
for ((k = 0; k < ${#kinds[@]}; k++)); do
  kind=${kinds[k]}
  wait_for "the job to train $((gaps[k])) steps before '$kind'" 180 running_in 1 -1
  a=$attempt
  base=$(( $(resume_step "$job" "$a") > 0 ? $(resume_step "$job" "$a") : 0 ))
  wait_for "the job to train before '$kind'" 180 ready "$a" $((base + gaps[k]))
  before=$(last_step "$job" "$a")
  t0=$(now)
  echo "-- $kind at step $before of attempt $a (committed $committed)"
  committed_at=$committed  # the newest commit seen before the blow
  detail=""
  case $kind in
    preempt)
      urgent=$(submit --name urgent --priority 10 --nodes 2 --gpus-per-node 1 -- sh -c 'sleep 1')
      result=$(cli wait "$urgent" --timeout 120)
      [ "$result" = "job $urgent SUCCEEDED" ] || fail "urgent job: $result"
      ;;
    kill-rank)
      r=$kill_rank
      pid=$(rank_pid "$job" "$a" "$r")
      knode=$(rank_node "$job" "$a" "$r")
      kill -9 "$pid" || fail "kill -9 rank $r (pid $pid)"
      detail="rank $r"
      ;;
    kill-agent)
      node=node-$agent_pick
      kill -9 "${agent_pid[$node]}" || fail "kill -9 agent $node"
      # The node goes DOWN (heartbeat timeout); the agent comes back later.
      node_down() { cli nodes 2> /dev/null | grep -q "^$node  *DOWN"; }
      wait_for "$node to go DOWN" 30 node_down
      start_agent "${node#node-}"
      detail="$node"
      ;;
    kill-coordinator)
      kill -9 "$coordinator_pid" || fail "kill -9 coordinator"
      start_coordinator
      ;;
    hang)
      r=$hang_rank_pick
      pid=$(rank_pid "$job" "$a" "$r")
      hnode=$(rank_node "$job" "$a" "$r")
      kill -STOP -- "-$pid" || fail "kill -STOP rank $r (pid $pid)"
      wait_for "the hang to be detected" 30 hang_seen
      detect=$(elapsed "$t0")
      [ "$hang_rank" = "$r" ] && [ "$hang_node" = "$hnode" ] ||
        fail "hang suspect: rank $hang_rank on $hang_node, want rank $r on $hnode"
      python3 -c "import sys; sys.exit(0 if $detect <= 5 + 5 else 1)" ||
        fail "hang detected after $detect s (timeout 5 s + 5 s)"
      detail="rank $r on $hnode; detected after $detect s (timeout 5 s), suspect named: rank $hang_rank on $hang_node"
      ;;
  esac
  # Training runs again: the coordinator restart keeps the attempt; every
  # other interruption moves to a new one.
  if [ "$kind" = kill-coordinator ]; then
    wait_for "training to continue after '$kind'" 120 running_in "$a" "$before"
    recomputed=0
  else
    wait_for "training to resume after '$kind'" 180 running_in $((a + 1)) -1
    resumed=$(resume_step "$job" "$attempt")
    last=$(last_step "$job" "$a")
    recomputed=$(( last + 1 - resumed ))
    [ "$resumed" -ge 0 ] || fail "attempt $attempt after '$kind' did not resume from a checkpoint"
  fi
  if [ "$kind" = kill-rank ]; then
    # The requeue names the rank killed, not its peer that exited on it.
    why=$(grep -ho "job $job -> PENDING: requeued after attempt $a: .*" "$work/coordinator.log" | tail -n 1)
    case $why in
      *": rank $r on node $knode was killed by signal 9 "*) detail="$detail; reason: ${why#*: }" ;;
      *) fail "the requeue after kill -9 of rank $r on $knode names another cause: $why" ;;
    esac
  fi
  took=$(elapsed "$t0")
  # At most one interval, plus the few steps a checkpoint takes to commit
  # behind the training (saves are asynchronous): a blow that falls while the
  # newest one is still being written costs the steps since the one before.
  # On a loaded machine the blow can fall well after `ready` saw that commit
  # (the CLI calls between them take time) while the next checkpoint is still
  # being written; then the resume may cost every step since that commit, and
  # never more: nothing committed before the blow is lost.
  limit=$((every + every / 4))
  if [ "$kind" != kill-coordinator ]; then
    [ "$resumed" -ge "$committed_at" ] ||
      fail "'$kind': resumed from step $resumed, behind checkpoint $committed_at committed before the blow"
    since=$((last + 1 - committed_at))
    if [ "$since" -gt "$limit" ]; then
      limit=$since
      detail="${detail:+$detail; }$since steps since the newest commit before the blow"
    fi
  fi
  [ "$recomputed" -le "$limit" ] ||
    fail "'$kind' cost $recomputed recomputed steps (> interval $every + $((every / 4)) in flight)"
  line="$kind${detail:+ ($detail)}: steps recomputed $recomputed (interval $every), training again after $took s"
  echo "   $line"
  report+=("$line")
done

finished() { poll "$job" && case $state in SUCCEEDED | FAILED | CANCELLED) true ;; *) false ;; esac; }
wait_for "the interrupted job to finish" 300 finished  # polling: straggler flags are seen
[ "$state" = SUCCEEDED ] || die "interrupted job: $state ($(cli job "$job" | grep reason))"
[ -s "$work/out/reference.safetensors" ] || fail "the reference wrote no weights"
if cmp -s "$work/out/reference.safetensors" "$work/out/interrupted.safetensors"; then
  weights=identical
else
  weights=DIFFERENT
  fail "final weights differ from the uninterrupted run"
fi

# Stragglers: the slow rank flagged, the other never.
flagged=$(awk '{print $2}' "$work/stragglers" | tr ',' '\n' | sort -u | tr '\n' ' ')
case " $flagged " in
  *" $((1 - slow_rank)) "*) fail "rank $((1 - slow_rank)) (never slow) was flagged a straggler" ;;
  *) ! steady_flagged_in_log "$job" ||
       fail "rank $((1 - slow_rank)) (never slow) was flagged in a window (coordinator.log)" ;;
esac
case " $flagged " in
  *" $slow_rank "*)
    first=$(slow_rank_first_flag "$work/stragglers")
    flag_after=$(python3 -c "print(f'{$first - ${slow_seen_at:-$first}:.1f}')")
    # K=3 windows of 3 s slow in a row, plus one window of phase, a heartbeat
    # and this script's polling through the CLI (slow on a busy machine).
    python3 -c "import sys; sys.exit(0 if $flag_after <= 3 * 3 + 3 + 3 else 1)" ||
      fail "the straggler was flagged $flag_after s after its slow steps began (> 4 windows + 3 s)"
    ;;
  *) fail "the 3x straggler (rank $slow_rank) was never flagged" ;;
esac

echo "== summary (seed $seed, $([ "$netns_mode" = 1 ] && echo "3 namespace hosts" || echo loopback))"
for line in "${report[@]}"; do echo "  $line"; done
echo "  reference run (the same straggler stretch): flagged ${ref_flagged:-none}"
echo "  straggler: rank $slow_rank 3x from step $slow_from; flagged: ${flagged:-none}${flag_after:+ ($flag_after s after its slow steps began, 3 windows of 3 s)}"
echo "  final weights vs uninterrupted run: $weights"
if [ "$failures" -gt 0 ]; then
  keep_logs
  echo "$failures failure(s) (seed $seed)"
  exit 1
fi
[ -z "${ATHANOR_E2E_KEEP_LOGS:-}" ] || keep_logs
echo PASS
