#!/usr/bin/env bash
# A network per job (the coordinator's --job-network) across two hosts
# (network + UTS namespaces, see netns_hosts.sh): the coordinator and agent
# node-a on host A, agent node-b on host B.
#   - a 2-node job (one rank per node) whose ranks listen on a port and
#     connect to each other over TCP at their job addresses: both connect;
#   - from both ranks of a second job (one on each host): connecting to the
#     coordinator's port, to either agent's port, and to the first job's
#     listener on the same host and on the other host all fail (each attempt
#     is counted: refused, timed out or unreachable), while the same
#     coordinator and agent ports do answer from the hosts themselves, and
#     what the agents' --net-allow allows (a listener on host A) is reached,
#     masqueraded from host B;
#   - a SIGKILLed agent's box network (veth, routes, rules) is removed when
#     it starts again;
#   - once the jobs have ended, no veth, route or rule of theirs is left.
# Needs root, `ip`, `iptables` and python3 (the ranks' probes); exits 77
# (skipped) when not root and fails when a tool is missing.
# Usage: job_network_netns_test.sh BIN_DIR
set -u
bin_dir=${1:?usage: job_network_netns_test.sh BIN_DIR}
[ "$(id -u)" = 0 ] || { echo "SKIPPED: needs root (network namespaces, iptables)"; exit 77; }
for b in athanor athanor-coordinator athanor-agent athanor-sandbox-exec; do
  [ -x "$bin_dir/$b" ] || { echo "FAIL: $bin_dir/$b is missing"; exit 1; }
done
for t in ip iptables nsenter python3; do
  command -v "$t" > /dev/null || { echo "FAIL: $t is missing (the job network needs ip, iptables, nsenter)"; exit 1; }
done
ATHANOR_REQUIRE_NETNS=1  # as root, namespaces must work: fail, never skip
. "$(dirname "$0")/netns_hosts.sh"

work=$(mktemp -d)
chmod 1777 "$work"  # sandboxed ranks (tenant uids) write their results here
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
coordinator="$addr_a:29621"
agent_a="$addr_a:29631" agent_b="$addr_b:29632"
"$bin_dir/athanor" admin ca init --dir "$work/tls" > /dev/null || { echo "FAIL: ca init"; exit 1; }
for n in node-a node-b; do
  "$bin_dir/athanor" admin ca agent --dir "$work/tls" --node "$n" > /dev/null || { echo "FAIL: ca agent $n"; exit 1; }
done
cli() {
  ATHANOR_TOKEN_FILE="$work/tls/admin.token" on_host "$ns_a" host-a timeout 60 "$bin_dir/athanor" \
    --coordinator "$coordinator" --ca "$work/tls/ca.crt" "$@"
}

# Daemons under a watchdog; killed on exit.
spawn_on_host "$ns_a" host-a "$work/coordinator.log" timeout 240 "$bin_dir/athanor-coordinator" \
  --listen "$coordinator" --state "$work/state.db" --tls-dir "$work/tls" --job-network 10.64.0.0/16
# What the operator allows (--net-allow), standing for DNS or the object
# store: a listener on host A that answers with the address it sees.
allowed="$addr_a:29640"
spawn_on_host "$ns_a" host-a "$work/allowed.log" timeout 240 python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16)
while True:
    c, peer = s.accept(); c.sendall(("allowed %s\n" % peer[0]).encode()); c.close()' "$addr_a" 29640
# start_agent NS NODE ADDR LISTEN LOG
start_agent() {
  mkdir -p "$work/$2"
  spawn_on_host "$1" "host-${2#node-}" "$5" timeout 240 "$bin_dir/athanor-agent" \
    --coordinator "$coordinator" --name "$2" --gpus 3 --host "$3" --listen "$4" \
    --work-dir "$work/$2" --tls-dir "$work/tls" --sandbox-shared-dir "$work" --no-checkpoint-service \
    --net-allow "$allowed"
}
start_agent "$ns_a" node-a "$addr_a" "$agent_a" "$work/agent-node-a.log"
start_agent "$ns_b" node-b "$addr_b" "$agent_b" "$work/agent-node-b.log"

# What of job networks a host holds: box veths, routes into 10.64/16, filter rules.
network_left() {
  { ip -n "$1" -o link show | grep -Eo ': ath[0-9a-f]{8}@'
    ip -n "$1" route show | grep '^10\.64\.'
    ip netns exec "$1" iptables -S | grep -E -- '-[io] ath[0-9a-f]{8} '; } | sed 's/^/  /'
}
# await_clean NS: none of it is left, within 30 s (the agent tears boxes down
# after the ranks' exits, another process's doing: polled).
await_clean() {
  local deadline=$(( $(date +%s) + 30 ))
  while [ -n "$(network_left "$1")" ]; do
    if [ "$(date +%s)" -gt "$deadline" ]; then
      fail "host $1 kept parts of a job network:"; network_left "$1"
      return
    fi
    sleep 0.1  # sleep override: the agent (another process) tears the box down
  done
}

# Both nodes registered and UP: each `nodes` call is one round trip; give up after 30 s.
deadline=$(( $(date +%s) + 30 ))
until [ "$(cli nodes 2> /dev/null | grep -c ' UP ')" = 2 ]; do
  if [ "$(date +%s)" -gt "$deadline" ]; then
    fail "the agents did not both register"
    tail -n 5 "$work"/agent-*.log "$work/coordinator.log"
    exit 1
  fi
done

# The ranks' program: `peer` listens on port 7000 at the rank's job address,
# connects to the other rank's listener and waits for $work/done; `probe`
# tries each HOST:PORT given and writes one line per attempt.
cat > "$work/netcheck.py" << 'EOF'
import os, socket, sys, threading, time
work, mode = sys.argv[1], sys.argv[2]
job, rank = os.environ["ATHANOR_JOB_ID"], int(os.environ["RANK"])
def own_address():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((os.environ["MASTER_ADDR"], 9))
    return s.getsockname()[0]
def attempt(target):
    host, port = target.rsplit(":", 1)
    try:
        c = socket.create_connection((host, int(port)), timeout=3)
    except ConnectionRefusedError:
        return "refused"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return "unreachable:%d" % e.errno
    try:  # connected: what the listener says first, if anything (our peers say who they are)
        c.settimeout(3)
        return ("connected " + c.recv(64).decode(errors="replace")).strip()
    except OSError:
        return "connected"
    finally:
        c.close()
def publish(name, text):
    with open(os.path.join(work, name + ".tmp"), "w") as f:
        f.write(text + "\n")
    os.rename(os.path.join(work, name + ".tmp"), os.path.join(work, name))
def wait_for(name, seconds):
    deadline = time.time() + seconds
    while not os.path.exists(os.path.join(work, name)):
        if time.time() > deadline:
            sys.exit("gave up waiting for " + name)
        time.sleep(0.05)  # sleep override: another process writes the file
    return open(os.path.join(work, name)).read().strip()
if mode == "peer":
    me = own_address()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 7000))
    srv.listen(16)
    def serve():
        while True:
            c, _ = srv.accept()
            c.sendall(("job-%s-rank-%d\n" % (job, rank)).encode())
            c.close()
    threading.Thread(target=serve, daemon=True).start()
    publish("peer-%d.addr" % rank, me)
    other = wait_for("peer-%d.addr" % (1 - rank), 60)
    publish("peer-%d.result" % rank, other + ":7000 " + attempt(other + ":7000"))
    wait_for("done", 150)
elif mode == "hold":
    publish("hold-%d.ready" % rank, own_address())
    wait_for("release", 150)
else:
    publish("probe-%d.result" % rank, "\n".join(t + " " + attempt(t) for t in sys.argv[3:]))
EOF

echo "== a 2-node job whose ranks connect to each other"
peers=$(cli submit --name peers --nodes 2 --gpus-per-node 1 -- python3 "$work/netcheck.py" "$work" peer | head -1)
[ -n "$peers" ] || { fail "submit printed no job id"; exit 1; }
deadline=$(( $(date +%s) + 60 ))
until [ -e "$work/peer-0.result" ] && [ -e "$work/peer-1.result" ]; do
  if [ "$(date +%s)" -gt "$deadline" ]; then
    fail "the peer job's ranks did not both report"
    cli job "$peers"; tail -n 20 "$work"/node-*/jobs/"$peers"/attempt-1/rank-*.log "$work"/agent-*.log
    exit 1
  fi
  sleep 0.1  # sleep override: the ranks (other processes) write the files
done
peer0=$(cat "$work/peer-0.addr") peer1=$(cat "$work/peer-1.addr")
[ "$peer0" = 10.64.0.1 ] && [ "$peer1" = 10.64.0.2 ] || fail "job addresses: $peer0 and $peer1 (want 10.64.0.1 and 10.64.0.2)"
for r in 0 1; do
  other=$([ "$r" = 0 ] && echo "$peer1" || echo "$peer0")
  want="$other:7000 connected job-$peers-rank-$((1 - r))"
  got=$(cat "$work/peer-$r.result")
  [ "$got" = "$want" ] && echo "peer rank $r: $got" || fail "peer rank $r: '$got' (want '$want')"
done

echo "== a rank of another job reaches none of it"
targets=("$coordinator" "$agent_a" "$agent_b" "$peer0:7000" "$peer1:7000" "$allowed")
intruder=$(cli submit --name intruder --nodes 2 --gpus-per-node 1 -- \
           python3 "$work/netcheck.py" "$work" probe "${targets[@]}" | head -1)
[ -n "$intruder" ] || { fail "submit printed no job id"; exit 1; }
result=$(cli wait "$intruder" --timeout 90)
[ "$result" = "job $intruder SUCCEEDED" ] || fail "intruder: $result"
blocked=0 seen_from=()
for r in 0 1; do
  [ -e "$work/probe-$r.result" ] || { fail "intruder rank $r wrote no result"; continue; }
  while read -r target outcome; do
    if [ "$target" = "$allowed" ]; then
      echo "intruder rank $r -> $target (allowed): $outcome"
      seen_from+=("${outcome#connected allowed }")
      continue
    fi
    case "$outcome" in
      refused|timeout|unreachable:*) blocked=$((blocked + 1)); echo "intruder rank $r -> $target: $outcome" ;;
      *) fail "intruder rank $r reached $target: $outcome" ;;
    esac
  done < "$work/probe-$r.result"
done
[ "$blocked" = 10 ] || fail "blocked attempts: $blocked (want 10: 5 targets from each of 2 ranks)"
# The allowed listener sees the rank on host B as host B (masqueraded), the
# one on its own host A at its job address (it reaches host A's own address).
seen=$(printf '%s\n' "${seen_from[@]}" | sort | tr '\n' ' ')
[[ "$seen" =~ ^10\.64\.1\.[12]\ $addr_b\ $ ]] ||
  fail "the allowed listener saw '$seen' (want the rank on host A's 10.64.1.x and host B's $addr_b)"

echo "== the same ports answer from the hosts themselves"
for ns_target in "$ns_a $coordinator" "$ns_b $agent_a" "$ns_a $agent_b"; do
  set -- $ns_target
  ip netns exec "$1" python3 -c "import socket,sys; h,p=sys.argv[1].rsplit(':',1); socket.create_connection((h,int(p)),timeout=3).close()" "$2" ||
    fail "$2 does not answer from host $1: the probes above proved nothing"
done

echo "== the peer job ends, and its network with it"
touch "$work/done"
result=$(cli wait "$peers" --timeout 60)
[ "$result" = "job $peers SUCCEEDED" ] || fail "peers: $result"
await_clean "$ns_a"
await_clean "$ns_b"

echo "== a SIGKILLed agent's job network goes at its next start"
held=$(cli submit --name held --nodes 2 --gpus-per-node 1 -- python3 "$work/netcheck.py" "$work" hold | head -1)
deadline=$(( $(date +%s) + 60 ))
until [ -e "$work/hold-0.ready" ] && [ -e "$work/hold-1.ready" ]; do
  [ "$(date +%s)" -gt "$deadline" ] && { fail "the held job's ranks did not start"; break; }
  sleep 0.1  # sleep override: the ranks (other processes) write the files
done
agent_pid=$(pgrep -f "^$bin_dir/athanor-agent .*--work-dir $work/node-b " | head -1)
[ -n "$agent_pid" ] || fail "cannot find node-b's agent"
kill -9 "$agent_pid"
while kill -0 "$agent_pid" 2> /dev/null; do
  sleep 0.05  # sleep override: the agent is not our child, so there is nothing to wait on
done
left=$(network_left "$ns_b")
echo "left on host B by the killed agent:"; echo "$left"
[ "$(echo "$left" | grep -c 'ath\|10\.64\.')" -ge 3 ] || fail "the killed agent's box network was not there to clean up"
start_agent "$ns_b" node-b "$addr_b" "$agent_b" "$work/agent-node-b.2.log"
await_clean "$ns_b"
cli cancel "$held" > /dev/null
touch "$work/release"
cli wait "$held" --timeout 60 > /dev/null
await_clean "$ns_a"

host_cleanups+=("rm -rf '$work'")  # after the daemons are killed
if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  tail -n 20 "$work"/agent-*.log
  exit 1
fi
echo PASS
