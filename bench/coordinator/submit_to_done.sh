#!/usr/bin/env bash
# Submit-to-done of a trivial job through the real CLI, coordinator and one
# agent: plain (--insecure, loopback) against secure (TLS with a token for the
# CLI, mutual TLS for the agent), both measured in this run. Each sample is
# `athanor submit -- true` then `athanor wait --interval-ms 5` (two CLI
# processes, so every sample pays the TLS handshakes a user pays; a 5 ms poll
# so that wait's default 200 ms poll does not quantise the result). Ranks run --no-sandbox in both
# modes: this measures the RPC security, not the sandbox.
#
#   bench/coordinator/submit_to_done.sh BIN_DIR [SAMPLES]
#
# Prints the median and p90 per mode and the ratio secure/plain of medians.
set -euo pipefail
bin=${1:?usage: submit_to_done.sh BIN_DIR [SAMPLES]}
samples=${2:-30}
work=$(mktemp -d /tmp/athanor-submit-to-done.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return; }
  done
}

# measure MODE: prints one latency (ms) per line.
measure() {
  local mode=$1 dir="$work/$1" port
  mkdir -p "$dir"
  port=$(free_port)
  local coord=(--insecure) agent=(--insecure) cli=()
  if [ "$mode" = secure ]; then
    "$bin/athanor" admin ca init --dir "$dir/tls" >/dev/null
    "$bin/athanor" admin ca agent --dir "$dir/tls" --node n0 >/dev/null
    coord=(--tls-dir "$dir/tls")
    agent=(--tls-dir "$dir/tls")
    cli=(--ca "$dir/tls/ca.crt" --token-file "$dir/tls/admin.token")
  fi
  "$bin/athanor-coordinator" --listen "127.0.0.1:$port" --state "$dir/state.db" "${coord[@]}" \
    >"$dir/coordinator.log" 2>&1 &
  pids+=($!)
  "$bin/athanor-agent" --coordinator "127.0.0.1:$port" --name n0 --gpus 1 --work-dir "$dir/n0" \
    --listen 127.0.0.1:0 --no-sandbox "${agent[@]}" >"$dir/agent.log" 2>&1 &
  pids+=($!)
  local cli_cmd=("$bin/athanor" --coordinator "127.0.0.1:$port" "${cli[@]}")
  for _ in $(seq 1 200); do
    [ "$("${cli_cmd[@]}" nodes 2>/dev/null | grep -c ' UP ')" = 1 ] && break
    sleep 0.1
  done
  # One warm-up job, then the samples.
  "${cli_cmd[@]}" wait "$("${cli_cmd[@]}" submit --nodes 1 --gpus-per-node 1 -- true)" --timeout 30 >/dev/null
  for _ in $(seq 1 "$samples"); do
    local t0 t1 id
    t0=$(date +%s%N)
    id=$("${cli_cmd[@]}" submit --nodes 1 --gpus-per-node 1 -- true)
    "${cli_cmd[@]}" wait "$id" --timeout 30 --interval-ms 5 >/dev/null
    t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000 ))
  done
}

stats() {  # stats FILE: "median p90" in ms from microsecond samples
  sort -n "$1" | awk '{v[NR]=$1} END {m=v[int((NR+1)/2)]; p=v[int(NR*0.9+0.5)]; printf "%.1f %.1f\n", m/1000, p/1000}'
}

# Alternate the modes so that noise on this machine falls on both.
: >"$work/plain.txt"
: >"$work/secure.txt"
half=$(( (samples + 1) / 2 ))
for round in 1 2; do
  for mode in plain secure; do
    samples=$half measure "$mode" >>"$work/$mode.txt"
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    pids=()
    rm -rf "${work:?}/$mode"
  done
done
read -r pm p90 < <(stats "$work/plain.txt")
read -r sm s90 < <(stats "$work/secure.txt")
printf '%-8s %8s %10s %8s\n' mode samples median_ms p90_ms
printf '%-8s %8d %10s %8s\n' plain "$(wc -l <"$work/plain.txt")" "$pm" "$p90"
printf '%-8s %8d %10s %8s\n' secure "$(wc -l <"$work/secure.txt")" "$sm" "$s90"
awk -v s="$sm" -v p="$pm" 'BEGIN {printf "secure/plain median: %.2fx\n", s / p}'
