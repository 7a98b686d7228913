#!/usr/bin/env bash
# All-reduce bandwidth inside a 2-node job (one rank per namespace host), with
# and without --job-network, interleaved: two clusters on the same two network
# namespace hosts (tests/cross_host/netns_hosts.sh), the one without the job
# network on its own master port range. Prints min, median and max busbw of
# each and the ratio of medians. Needs root.
# Usage: bench/job_network/allreduce_netns.sh BIN_DIR [RUNS]
set -u
bin_dir=${1:?usage: allreduce_netns.sh BIN_DIR [RUNS]} runs=${2:-10}
. "$(dirname "$0")/../../tests/cross_host/netns_hosts.sh"
work=$(mktemp -d); chmod 1777 "$work"
"$bin_dir/athanor" admin ca init --dir "$work/tls" > /dev/null
for n in on-a on-b off-a off-b; do "$bin_dir/athanor" admin ca agent --dir "$work/tls" --node "$n" > /dev/null; done
declare -A coord=([on]="$addr_a:29621" [off]="$addr_a:29622")
cli() { local c=$1; shift; ATHANOR_TOKEN_FILE="$work/tls/admin.token" on_host "$ns_a" host-a timeout 120 "$bin_dir/athanor" --coordinator "${coord[$c]}" --ca "$work/tls/ca.crt" "$@"; }
spawn_on_host "$ns_a" host-a "$work/coord-on.log" timeout 1800 "$bin_dir/athanor-coordinator" --listen "${coord[on]}" --state "$work/on.db" --tls-dir "$work/tls" --job-network 10.64.0.0/16
spawn_on_host "$ns_a" host-a "$work/coord-off.log" timeout 1800 "$bin_dir/athanor-coordinator" --listen "${coord[off]}" --master-port-range 29700-29799 --state "$work/off.db" --tls-dir "$work/tls"
port=29631
for c in on off; do
  for spec in "$ns_a a $addr_a" "$ns_b b $addr_b"; do
    set -- $spec
    mkdir -p "$work/$c-$2"
    spawn_on_host "$1" "host-$2" "$work/agent-$c-$2.log" timeout 1800 "$bin_dir/athanor-agent" --coordinator "${coord[$c]}" \
      --name "$c-$2" --gpus 1 --host "$3" --listen "$3:$port" --work-dir "$work/$c-$2" --tls-dir "$work/tls" \
      --sandbox-shared-dir "$work" --sandbox-shared-dir "$bin_dir" --no-checkpoint-service
    port=$((port + 1))
  done
done
for c in on off; do
  until [ "$(cli $c nodes 2> /dev/null | grep -c ' UP ')" = 2 ]; do sleep 0.2; done
done
for i in $(seq 1 "$runs"); do
  for c in on off; do
    job=$(cli $c submit --name bench --nodes 2 --gpus-per-node 1 -- "$bin_dir/athanor-bench-allreduce" --backend ucx \
          --baseline none --min-bytes 64M --max-bytes 64M --batches 5 --iters 5 --warmup 2 --check --json "$work/$c-$i.json" | head -1)
    r=$(cli $c wait "$job" --timeout 300)
    bw=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d[-1]['busbw_gbps'], d[-1].get('wrong', d[-1].get('n_wrong','?')))" "$work/$c-$i.json" 2>/dev/null)
    echo "$c run $i: $r busbw $bw"
  done
done
python3 - "$work" "$runs" << 'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
res = {}
for c in ("on", "off"):
    v = []
    for i in range(1, runs + 1):
        try: v.append(json.load(open(f"{work}/{c}-{i}.json"))[-1]["busbw_gbps"])
        except Exception: pass
    res[c] = v
    print(c, "n=%d min %.3f median %.3f max %.3f GB/s" % (len(v), min(v), statistics.median(v), max(v)))
print("ratio of medians (on/off): %.3f" % (statistics.median(res["on"]) / statistics.median(res["off"])))
PY
grep -h "transports" "$work"/on-*/jobs/*/attempt-1/rank-0.log | head -1
grep -h "transports" "$work"/off-*/jobs/*/attempt-1/rank-0.log | head -1
