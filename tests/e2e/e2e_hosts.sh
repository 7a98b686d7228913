# Sourced by the end-to-end test: three "hosts" (network + UTS namespaces
# ${host_ns[i]} at ${host_addr[i]} = 10.79.0.(i+1), each joined by a veth pair
# to one bridge in a switch namespace), so that rank traffic and uploads cross
# a network stack. Where namespaces cannot be made it says so and falls back to
# loopback (every host is 127.0.0.1 and commands run directly), unless
# ATHANOR_REQUIRE_NETNS is set (scripts/test sets it as root, where they must
# work): then it fails. Cleans up on exit.
#
#   make_hosts 3; on_host I CMD...; spawn_on_host I OUTFILE CMD... (sets spawned_pid)

host_ns=() host_addr=()
host_cleanups=()
netns_mode=0
tag="ath$$"
sw_ns="${tag}sw"
e2e_cleanup() {
  local c ns
  for c in "${host_cleanups[@]}"; do eval "$c"; done
  if [ "$netns_mode" = 1 ]; then
    for ns in "${host_ns[@]}" "$sw_ns"; do ip netns del "$ns" 2> /dev/null; done
  fi
}
trap e2e_cleanup EXIT

# $enter: cgroups remounted, host named (shared with the cross-host tests).
. "$(dirname "${BASH_SOURCE[0]}")/../cross_host/netns_enter.sh"

no_netns() {
  if [ -n "${ATHANOR_REQUIRE_NETNS:-}" ]; then
    echo "FAILED: ATHANOR_REQUIRE_NETNS is set but: $*"
    exit 1
  fi
  echo "NOTE: $*; running the same scenario on loopback"
  local ns
  for ns in "${host_ns[@]}" "$sw_ns"; do ip netns del "$ns" 2> /dev/null; done
  netns_mode=0
  host_ns=() host_addr=()
}

try_netns() {
  local n=$1 i ns
  [ "$(id -u)" = 0 ] || { no_netns "network namespaces need root"; return 1; }
  command -v ip > /dev/null && command -v unshare > /dev/null ||
    { no_netns "network namespaces need iproute2 and util-linux"; return 1; }
  netns_mode=1
  ip netns add "$sw_ns" 2> /dev/null || { no_netns "cannot create network namespaces here"; return 1; }
  ip -n "$sw_ns" link add br0 type bridge && ip -n "$sw_ns" link set br0 up ||
    { no_netns "cannot create a bridge here"; return 1; }
  for ((i = 0; i < n; i++)); do
    ns="${tag}h$i"
    host_ns+=("$ns")
    host_addr+=("10.79.0.$((i + 1))")
    ip netns add "$ns" &&
      ip link add "${tag}h$i" type veth peer name "${tag}p$i" &&
      ip link set "${tag}h$i" netns "$ns" && ip link set "${tag}p$i" netns "$sw_ns" &&
      ip -n "$sw_ns" link set "${tag}p$i" master br0 && ip -n "$sw_ns" link set "${tag}p$i" up &&
      ip -n "$ns" addr add "10.79.0.$((i + 1))/24" dev "${tag}h$i" &&
      ip -n "$ns" link set "${tag}h$i" up && ip -n "$ns" link set lo up ||
      { no_netns "could not set up namespace host $i"; return 1; }
  done
  on_host 0 true 2> /dev/null || { no_netns "cannot enter network or UTS namespaces here"; return 1; }
}

make_hosts() {
  local n=$1 i
  if ! try_netns "$n"; then
    for ((i = 0; i < n; i++)); do host_addr+=(127.0.0.1); done
  fi
}

# on_host I CMD [ARGS...]: CMD on host I (named host-I).
on_host() {
  local i=$1
  shift
  if [ "$netns_mode" = 1 ]; then
    ip netns exec "${host_ns[$i]}" unshare --uts sh -c "$enter" "host-$i" "$@"
  else
    "$@"
  fi
}

# spawn_on_host I OUTFILE CMD [ARGS...]: the same in the background, output
# appended to OUTFILE; spawned_pid is CMD's own pid (every step execs).
spawn_on_host() {
  local i=$1 outfile=$2
  shift 2
  if [ "$netns_mode" = 1 ]; then
    (exec ip netns exec "${host_ns[$i]}" unshare --uts sh -c "$enter" "host-$i" "$@" \
       >> "$outfile" 2>&1) &
  else
    (exec "$@" >> "$outfile" 2>&1) &
  fi
  spawned_pid=$!
  disown "$spawned_pid"  # killing it is expected: no job-control notice
  host_cleanups+=("kill -9 $spawned_pid 2> /dev/null")
}

# A TCP port free on host I (namespaced hosts have their own port space).
free_port_on() {
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    on_host "$1" ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return; }
  done
}

# secure_cli TIMEOUT_S NODE...: a CA in $work/tls with an agent certificate
# for each NODE and the admin token for the CLI (mutual TLS, as in
# production: docs/security.md), and `cli ARGS...`, the athanor CLI against
# $coordinator from host 0, each call given TIMEOUT_S at most. The CLI needs
# host 0's network only: no UTS namespace or cgroup mounts, which would take
# CPU from the ranks on a small machine. Uses $bin_dir and $work.
secure_cli() {
  cli_timeout=$1
  shift
  "$bin_dir/athanor" admin ca init --dir "$work/tls" > /dev/null || die "ca init"
  local n
  for n in "$@"; do
    "$bin_dir/athanor" admin ca agent --dir "$work/tls" --node "$n" > /dev/null || die "ca agent $n"
  done
  export ATHANOR_TOKEN_FILE="$work/tls/admin.token"
}
cli() {
  if [ "$netns_mode" = 1 ]; then
    ip netns exec "${host_ns[0]}" timeout "$cli_timeout" "$bin_dir/athanor" --coordinator "$coordinator" \
      --ca "$work/tls/ca.crt" "$@"
  else
    timeout "$cli_timeout" "$bin_dir/athanor" --coordinator "$coordinator" --ca "$work/tls/ca.crt" "$@"
  fi
}
