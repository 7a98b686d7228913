#!/usr/bin/env bash
# The flags athanor-sim and athanor-bench-scheduler pass on to the scheduler
# and the simulator, through the programs themselves:
#   - --strict-fair-share changes the default policy's decisions as worked
#     out by hand below (and the bench records it in its JSON);
#   - --monthly-gpu-h / --credit-tenants hold a tenant out of credit, and bad
#     values are refused with a message naming the flag.
# Every run has a 60 s watchdog.
#
# usage: sim_cli_test.sh BIN_DIR
set -u
bin=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# json FILE EXPR: EXPR (Python, over `d`) evaluated on FILE's JSON.
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# One node of 4 GPUs. x1 (tenant x, 2 GPUs, 1000 s) and z (2 GPUs, 100 s)
# start at 0; x2 (tenant x, 100 s) comes at 10, y1 (tenant y, 300 s) at 20,
# both waiting for z's 2 GPUs, free at 100. The default starts the older x2
# then (JCT 190), y1 at 200 (JCT 480): mean (1000 + 100 + 190 + 480) / 4 =
# 442.5 s. With strict fair share y1, whose tenant holds nothing, goes first
# (100-400, JCT 380) and x2 after (400-500, JCT 490): mean 492.5 s.
cat > "$scratch/jobs.csv" <<'CSV'
submit_time,num_gpus,duration,tenant,priority,nodes
0,2,1000,x,0,1
0,2,100,z,0,1
10,2,100,x,0,1
20,2,300,y,0,1
CSV
sim=(timeout 60 "$bin/athanor-sim" --csv "$scratch/jobs.csv" --nodes 1 --gpus-per-node 4 --json)
"${sim[@]}" > "$scratch/default.json" || fail "athanor-sim --csv: exit $?"
"${sim[@]}" --strict-fair-share > "$scratch/strict.json" || fail "athanor-sim --strict-fair-share: exit $?"
default_jct=$(json "$scratch/default.json" "[p['jct_mean_s'] for p in d['policies'] if p['policy'] == 'default'][0]")
strict_jct=$(json "$scratch/strict.json" "[p['jct_mean_s'] for p in d['policies'] if p['policy'] == 'default'][0]")
[[ $default_jct == 442.5 ]] || fail "default mean JCT $default_jct s, expected 442.5"
[[ $strict_jct == 492.5 ]] || fail "default --strict-fair-share mean JCT $strict_jct s, expected 492.5"
[[ $(json "$scratch/strict.json" "d['options']['strict_fair_share']") == True ]] ||
  fail "--strict-fair-share missing from the JSON options"

# Credit: x's plan grants 0.25 GPU-h (900 GPU-s) a month, checkpoints every
# 100 s. Under fifo x1 and x2 have used it by 350 s (x2 ran 100-200): x1 is
# stopped (300 s kept) and exits at 380, 60 GPU-s over. February's grant
# leaves 840 GPU-s: x1 runs 420 s (400 kept) and is stopped again. March's
# finishes its last 300 s. (Without checkpoints inside the 450 s a month
# buys, x1 would start over each month and never end.)
"${sim[@]}" --checkpoint-interval-s 100 --monthly-gpu-h 0.25 --credit-tenants x > "$scratch/credit.json" ||
  fail "athanor-sim --monthly-gpu-h: exit $?"
[[ $(json "$scratch/credit.json" "[(p['credit_holds'], p['credit_stops'], p['finished']) for p in d['policies']][0]") == "(2, 2, 4)" ]] ||
  fail "fifo: expected x held twice, x1 stopped twice, all 4 finished: $(json "$scratch/credit.json" "d['policies'][0]")"
[[ $(json "$scratch/credit.json" "d['options']['credit_tenants']") == "['x']" ]] ||
  fail "--credit-tenants missing from the JSON options"
out=$("${sim[@]}" --monthly-gpu-h 1 --credit-tenants nobody 2>&1)
rc=$?
[[ $rc -eq 1 && $out == *"credit tenant 'nobody' has no jobs in the workload"* ]] ||
  fail "unknown credit tenant: exit $rc, $out"
out=$("${sim[@]}" --credit-tenants x 2>&1)
rc=$?
[[ $rc -eq 2 && $out == *"--credit-tenants needs --monthly-gpu-h"* ]] || fail "--credit-tenants alone: exit $rc, $out"
out=$("${sim[@]}" --monthly-gpu-h -1 2>&1)
rc=$?
[[ $rc -eq 2 && $out == *"--monthly-gpu-h must be in [0, 1e9]"* ]] || fail "--monthly-gpu-h -1: exit $rc, $out"

# The bench on a two-pod trace: the flag reaches its runs' options.
mkdir -p "$scratch/traces"
printf 'sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n' > "$scratch/traces/openb_node_list_gpu_node.csv"
printf '%s\n' "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time" \
  "p0,1000,1024,1,1000,,LS,Running,10,110,20" "p1,1000,1024,2,1000,,BE,Running,30,300,40" \
  > "$scratch/traces/openb_pod_list_default.csv"
bench=(timeout 60 "$bin/athanor-bench-scheduler" --traces "$scratch/traces" --gangs 0 --scale-nodes 0 --json)
"${bench[@]}" > "$scratch/bench.json" || fail "athanor-bench-scheduler: exit $?"
"${bench[@]}" --strict-fair-share > "$scratch/bench-strict.json" || fail "athanor-bench-scheduler --strict-fair-share: exit $?"
[[ $(json "$scratch/bench.json" "d['options']['strict_fair_share']") == False ]] || fail "bench: strict_fair_share not false by default"
[[ $(json "$scratch/bench-strict.json" "d['options']['strict_fair_share']") == True ]] || fail "bench: --strict-fair-share not in its options"
[[ $(json "$scratch/bench-strict.json" "d['trace']['jobs']") == 2 ]] || fail "bench: expected the trace's 2 pods"

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "sim_cli_test: all passed"
