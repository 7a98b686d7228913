#!/usr/bin/env bash
# Collectives across hosts, with two network namespaces (joined by a veth
# pair) and two UTS namespaces standing for two hosts:
#   1. 4 ranks, 2 per host (0 and 2 on A): the conformance suite and concurrent tagged
#      all-reduces pass; between hosts UCX uses TCP, and the shared-memory
#      all-reduce stays off (the ranks are not all on one host).
#   2. 3 ranks, the one on host B is SIGKILLed after an all-reduce: both ranks
#      on host A fail with Unavailable naming rank 2 (UCX peer error handling,
#      no pidfd to watch across hosts), within the deadline.
# Needs root (ip netns, unshare --uts); exits 77 (skipped) without it.
# Usage: collectives_netns_test.sh BIN_DIR
set -u
bin_dir=${1:?usage: collectives_netns_test.sh BIN_DIR}
rank_bin="$bin_dir/athanor-collectives-rank"

[ -x "$rank_bin" ] || { echo "FAIL: $rank_bin is missing"; exit 1; }
. "$(dirname "$0")/netns_hosts.sh"

out=$(mktemp -d)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run_rank NS HOSTNAME RANK WORLD LOCAL_RANK LOCAL_WORLD PORT ARGS...: one rank
# in the background, under a 120 s watchdog; output in $out/rank-RANK.
run_rank() {
  local ns=$1 host=$2 rank=$3 world=$4 local_rank=$5 local_world=$6 port=$7
  shift 7
  spawn_on_host "$ns" "$host" "$out/rank-$rank" env RANK="$rank" WORLD_SIZE="$world" \
    LOCAL_RANK="$local_rank" LOCAL_WORLD_SIZE="$local_world" MASTER_ADDR="$addr_a" \
    MASTER_PORT="$port" timeout 120 "$rank_bin" "$@"
}

echo "== 4 ranks on 2 hosts: conformance"
# Ranks alternate between the hosts, so rank 0's ring neighbour (whose
# transports it logs) is on the other host.
run_rank "$ns_a" host-a 0 4 0 2 29611
run_rank "$ns_b" host-b 1 4 0 2 29611
run_rank "$ns_a" host-a 2 4 1 2 29611
run_rank "$ns_b" host-b 3 4 1 2 29611
for pid in $(jobs -p); do wait "$pid" || true; done
for r in 0 1 2 3; do
  grep -q "^rank $r: conformance ok$" "$out/rank-$r" || { fail "rank $r:"; cat "$out/rank-$r"; }
done
grep -q "transports: .*tcp/${tag}va" "$out/rank-0" ||
  { fail "rank 0 did not reach rank 1's host over TCP"; grep transports "$out/rank-0"; }
if grep -q "through shared memory" "$out/rank-0"; then
  fail "the shared-memory all-reduce was on across hosts"
fi

echo "== 3 ranks on 2 hosts: rank 2 (host B) is killed"
start=$(date +%s)
run_rank "$ns_a" host-a 0 3 0 2 29612 --die-rank 2
run_rank "$ns_a" host-a 1 3 1 2 29612 --die-rank 2
run_rank "$ns_b" host-b 2 3 0 1 29612 --die-rank 2
for pid in $(jobs -p); do wait "$pid" || true; done
elapsed=$(( $(date +%s) - start ))
for r in 0 1; do
  grep -q "^rank $r: UNAVAILABLE: .*rank 2" "$out/rank-$r" || { fail "rank $r:"; cat "$out/rank-$r"; }
done
# Every all-reduce has a 20 s deadline; the death must be seen well before.
[ "$elapsed" -lt 40 ] || fail "the dead rank took ${elapsed}s to be named"

rm -rf "$out"
if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS (killed rank named after ${elapsed}s)"
