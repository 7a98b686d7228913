#!/usr/bin/env bash
# Notebook start time: from `athanor alloc --notebook` to the notebook
# answering through the coordinator's proxy (GET /notebook/<job>/api/kernels
# is 200 over HTTPS, after a login with the token), on one host: a coordinator
# with --notebook-listen and one sandboxed agent. Each run's instance is
# cancelled and gone before the next. The baseline, measured in the same
# run just before each notebook: a bare `athanor alloc` (a placeholder rank)
# from submission to RUNNING, i.e. the platform's own start without Jupyter
# and the proxy. Prints each run, then min, median and max in seconds of
# both and of their ratio. Needs root (the sandbox) and jupyter-notebook.
# Usage: bench/notebook/start_time.sh BIN_DIR [RUNS]
set -u
bin_dir=${1:?usage: start_time.sh BIN_DIR [RUNS]} runs=${2:-10}
work=$(mktemp -d); chmod 1777 "$work"
trap 'kill $coord_pid $agent_pid 2> /dev/null; wait 2> /dev/null; rm -rf "$work"' EXIT
"$bin_dir/athanor" admin ca init --dir "$work/tls" > /dev/null
"$bin_dir/athanor" admin ca agent --dir "$work/tls" --node nb-1 > /dev/null
grpc=127.0.0.1:29641 nb_port=29642
"$bin_dir/athanor-coordinator" --listen "$grpc" --state "$work/state.db" --tls-dir "$work/tls" \
  --notebook-listen "127.0.0.1:$nb_port" > "$work/coord.log" 2>&1 &
coord_pid=$!
mkdir -p "$work/nb-1"
"$bin_dir/athanor-agent" --coordinator "$grpc" --name nb-1 --gpus 1 --listen 127.0.0.1:29643 \
  --work-dir "$work/nb-1" --tls-dir "$work/tls" --no-checkpoint-service > "$work/agent.log" 2>&1 &
agent_pid=$!
cli() { ATHANOR_TOKEN_FILE="$work/tls/admin.token" timeout 60 "$bin_dir/athanor" --coordinator "$grpc" --ca "$work/tls/ca.crt" "$@"; }
https() { curl -s --cacert "$work/tls/ca.crt" --resolve "coordinator.athanor:$nb_port:127.0.0.1" "$@"; }
until [ "$(cli nodes 2> /dev/null | grep -c ' UP ')" = 1 ]; do sleep 0.2; done
base="https://coordinator.athanor:$nb_port"
https -o /dev/null -c "$work/cookies" -X POST -H "Authorization: Bearer $(cat "$work/tls/admin.token")" "$base/notebook-login"
times=() bare_times=()
elapsed() { python3 -c "print(round($2 - $1, 3))"; }
for i in $(seq 1 "$runs"); do
  t0=$(date +%s.%N)
  bare=$(cli alloc --idle-timeout 10m 2> /dev/null | head -1)
  # The rank is another process: its state is polled, every 50 ms.
  until cli job "$bare" --json 2> /dev/null | grep -q '"state":"JOB_RUNNING"'; do sleep 0.05; done
  t1=$(date +%s.%N)
  bare_times+=("$(elapsed "$t0" "$t1")")
  cli cancel "$bare" > /dev/null
  cli wait "$bare" --timeout 60 > /dev/null 2>&1
  t0=$(date +%s.%N)
  job=$(cli alloc --notebook --idle-timeout 10m 2> /dev/null | head -1)
  until [ "$(https -o /dev/null -w '%{http_code}' -b "$work/cookies" "$base/notebook/$job/api/kernels")" = 200 ]; do
    sleep 0.05
  done
  t1=$(date +%s.%N)
  t=$(elapsed "$t0" "$t1")
  times+=("$t")
  echo "run $i: bare allocation running after ${bare_times[-1]} s; notebook $job reachable after $t s"
  cli cancel "$job" > /dev/null
  cli wait "$job" --timeout 60 > /dev/null 2>&1
done
python3 - "${bare_times[*]}" "${times[*]}" <<'PY'
import statistics, sys
bare = [float(x) for x in sys.argv[1].split()]
nb = [float(x) for x in sys.argv[2].split()]
def row(name, v, unit):
    v = sorted(v)
    print(f"{name}: min {v[0]:.3f}{unit}  median {statistics.median(v):.3f}{unit}  max {v[-1]:.3f}{unit}  ({len(v)} runs)")
row("bare allocation (baseline)", bare, " s")
row("notebook start", nb, " s")
row("ratio notebook / bare", [n / b for n, b in zip(nb, bare)], "")
PY
