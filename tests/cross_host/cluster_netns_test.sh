#!/usr/bin/env bash
# A cluster across two hosts (network + UTS namespaces, see netns_hosts.sh):
# the coordinator and agent node-a on host A, agent node-b on host B. A
# 2-node athanor-train job (one rank per node, ucx over TCP between the
# hosts) succeeds with weights bit-identical to the same training run by
# athanor-run on one host, and `athanor logs` fetches each rank's log from the
# agent that ran it. Needs root; exits 77 (skipped) without it.
# Usage: cluster_netns_test.sh BIN_DIR
set -u
bin_dir=${1:?usage: cluster_netns_test.sh BIN_DIR}
for b in athanor athanor-coordinator athanor-agent athanor-train athanor-run; do
  [ -x "$bin_dir/$b" ] || { echo "FAIL: $bin_dir/$b is missing"; exit 1; }
done
. "$(dirname "$0")/netns_hosts.sh"

work=$(mktemp -d)
chmod 1777 "$work"  # sandboxed ranks (tenant uids) write their weights here
# One cluster key for both agents: the attempt's ranks rendezvous with its secret.
(umask 077; od -An -N24 -tx1 /dev/urandom | tr -d ' \n' > "$work/cluster.key")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
coordinator="$addr_a:29621"
# Secure, as in production: one cluster CA, mutual TLS between the hosts, the
# CLI with the CA and the bootstrap admin token (docs/security.md).
"$bin_dir/athanor" admin ca init --dir "$work/tls" > /dev/null || { echo "FAIL: ca init"; exit 1; }
for n in node-a node-b; do
  "$bin_dir/athanor" admin ca agent --dir "$work/tls" --node "$n" > /dev/null || { echo "FAIL: ca agent $n"; exit 1; }
done
cli() {
  ATHANOR_TOKEN_FILE="$work/tls/admin.token" on_host "$ns_a" host-a timeout 60 "$bin_dir/athanor" \
    --coordinator "$coordinator" --ca "$work/tls/ca.crt" "$@"
}

# Daemons under a watchdog; killed on exit.
spawn_on_host "$ns_a" host-a "$work/coordinator.log" timeout 300 "$bin_dir/athanor-coordinator" \
  --listen "$coordinator" --state "$work/state.db" --tls-dir "$work/tls"
for spec in "$ns_a node-a $addr_a" "$ns_b node-b $addr_b"; do
  set -- $spec
  mkdir -p "$work/$2"
  spawn_on_host "$1" "host-${2#node-}" "$work/agent-$2.log" timeout 300 "$bin_dir/athanor-agent" \
    --coordinator "$coordinator" --name "$2" --gpus 1 --host "$3" --listen "$3:0" \
    --work-dir "$work/$2" --tls-dir "$work/tls" --sandbox-shared-dir "$work" --sandbox-shared-dir "$bin_dir" --rendezvous-key-file "$work/cluster.key"
done

# Both nodes registered and UP: each `nodes` call is one round trip to the
# coordinator; give up after 30 s.
deadline=$(( $(date +%s) + 30 ))
until [ "$(cli nodes 2> /dev/null | grep -c ' UP ')" = 2 ]; do
  if [ "$(date +%s)" -gt "$deadline" ]; then
    fail "the agents did not both register"
    cli nodes
    tail -5 "$work"/agent-*.log "$work/coordinator.log"
    exit 1
  fi
done

train=("$bin_dir/athanor-train" --seed 7 --hidden 48 --optimizer sgd --lr 0.05 --steps 60 --timeout-s 30)
# Both runs pin OpenBLAS's kernels the same way: the agents start ranks with
# a clean environment and athanor-run passes its own on, so an
# OPENBLAS_CORETYPE set on the machine would otherwise reach one run only
# (AVX2 kernels against AVX-512 ones, which round differently).
export OPENBLAS_CORETYPE=Haswell
echo "== a 2-node training job across the hosts"
job=$(cli submit --name across --nodes 2 --gpus-per-node 1 --env OPENBLAS_CORETYPE=Haswell -- \
      "${train[@]}" --dump-weights "$work/across.safetensors" | head -1)
[ -n "$job" ] || { fail "submit printed no job id"; exit 1; }
result=$(cli wait "$job" --timeout 120)
[ "$result" = "job $job SUCCEEDED" ] || { fail "$result"; tail -20 "$work/coordinator.log"; }

echo "== the same training with athanor-run on one host"
timeout 120 "$bin_dir/athanor-run" --nproc 2 -- "${train[@]}" \
  --dump-weights "$work/local.safetensors" > "$work/local.log" 2>&1 || fail "athanor-run failed"
cmp -s "$work/across.safetensors" "$work/local.safetensors" ||
  fail "weights differ between the cross-host job and the one-host run"
[ -s "$work/local.safetensors" ] || fail "no weights were written"

echo "== athanor logs reaches both agents"
for r in 0 1; do
  node=$( [ -e "$work/node-a/jobs/$job/attempt-1/rank-$r.log" ] && echo node-a || echo node-b)
  want=$(sed "s/^/[rank $r] /" "$work/$node/jobs/$job/attempt-1/rank-$r.log")
  got=$(cli logs "$job" --rank "$r") || fail "athanor logs --rank $r failed (agent on $node)"
  [ "$got" = "$want" ] || fail "athanor logs --rank $r differs from $node's file"
done
# Rank 0 reports every step (the other ranks print nothing).
cli logs "$job" --rank 0 | grep -q '"step":59' ||
  fail "rank 0's log lacks its last step"
a_ranks=$(ls "$work/node-a/jobs/$job/attempt-1" 2> /dev/null | wc -l)
b_ranks=$(ls "$work/node-b/jobs/$job/attempt-1" 2> /dev/null | wc -l)
[ "$a_ranks" = 1 ] && [ "$b_ranks" = 1 ] || fail "ranks per node: node-a $a_ranks, node-b $b_ranks (want 1 and 1)"
grep -q "transports: .*tcp/" "$work"/node-*/jobs/"$job"/attempt-1/rank-0.log ||
  fail "rank 0 did not talk to rank 1 over TCP"

host_cleanups+=("rm -rf '$work'")  # after the daemons are killed
if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS
