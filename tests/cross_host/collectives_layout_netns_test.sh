#!/usr/bin/env bash
# Collectives on a mixed layout of ranks over several "hosts" (network + UTS
# namespaces on one bridge, see netns_star.sh), where the ucx backend runs
# its hierarchical all-reduce (shared memory on each host, blocks exchanged
# between hosts):
#   1. the conformance suite and concurrent tagged all-reduces pass on every
#      rank, and rank 0 reports the layout and the hierarchical path;
#   2. one rank on a host other than rank 0's is SIGKILLed after an
#      all-reduce: every other rank fails with Unavailable naming it, well
#      within the 20 s deadline of each call.
# PLACEMENT gives each rank's host as a letter, rank 0 first: "abab" is 2 + 2
# with the hosts interleaved, "aaba" 3 + 1, "abcc" 1 + 1 + 2. DIE is the rank
# to kill. Needs root; exits 77 (skipped) without it.
# Usage: collectives_layout_netns_test.sh BIN_DIR PLACEMENT DIE
set -u
bin_dir=${1:?usage: collectives_layout_netns_test.sh BIN_DIR PLACEMENT DIE}
placement=${2:?placement, e.g. abab}
die=${3:?rank to kill}
rank_bin="$bin_dir/athanor-collectives-rank"
[ -x "$rank_bin" ] || { echo "FAIL: $rank_bin is missing"; exit 1; }
. "$(dirname "$0")/netns_star.sh"

world=${#placement}
declare -A host_index
nhosts=0
for ((r = 0; r < world; r++)); do
  h=${placement:r:1}
  [ -n "${host_index[$h]:-}" ] || { host_index[$h]=$nhosts; nhosts=$((nhosts + 1)); }
done
make_hosts "$nhosts"
out=$(mktemp -d)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run_all PORT ARGS...: every rank on its host under a 120 s watchdog;
# output in $out/rank-R; waits for all.
run_all() {
  local port=$1 r h i lr lw
  shift
  for ((r = 0; r < world; r++)); do
    h=${placement:r:1}
    i=${host_index[$h]}
    lr=0 lw=0
    for ((q = 0; q < world; q++)); do
      [ "${placement:q:1}" = "$h" ] || continue
      [ "$q" -lt "$r" ] && lr=$((lr + 1))
      lw=$((lw + 1))
    done
    spawn_on_host "${host_ns[$i]}" "host-$h" "$out/rank-$r" env RANK="$r" WORLD_SIZE="$world" \
      LOCAL_RANK="$lr" LOCAL_WORLD_SIZE="$lw" MASTER_ADDR="${host_addr[0]}" MASTER_PORT="$port" \
      timeout 120 "$rank_bin" "$@"
  done
  for pid in $(jobs -p); do wait "$pid" || true; done
}

echo "== $world ranks placed $placement: conformance"
run_all 29631
for ((r = 0; r < world; r++)); do
  grep -q "^rank $r: conformance ok$" "$out/rank-$r" || { fail "rank $r:"; tail -20 "$out/rank-$r"; }
done
grep -q "are hierarchical.*over TCP sockets" "$out/rank-0" ||
  { fail "rank 0 did not take the hierarchical all-reduce over TCP sockets"; grep "ucx:" "$out/rank-0"; }

echo "== $world ranks placed $placement: rank $die is killed"
start=$(date +%s)
run_all 29632 --die-rank "$die"
elapsed=$(( $(date +%s) - start ))
for ((r = 0; r < world; r++)); do
  [ "$r" = "$die" ] && continue
  grep -q "^rank $r: UNAVAILABLE: .*rank $die" "$out/rank-$r" || { fail "rank $r:"; tail -5 "$out/rank-$r"; }
done
[ "$elapsed" -lt 40 ] || fail "the dead rank took ${elapsed}s to be named"

host_cleanups+=("rm -rf '$out'")
if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS (killed rank named after ${elapsed}s)"
