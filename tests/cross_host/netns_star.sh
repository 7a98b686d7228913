# Sourced by the cross-host tests that need more than two hosts: N "hosts",
# network namespaces ${host_ns[i]} (10.78.0.(i+1)) each joined by a veth pair
# to one bridge in a switch namespace. on_host / spawn_on_host run a command
# in one of them with its own UTS namespace (so its own hostname). Exits 77
# (skipped) where namespaces cannot be made; removes them on exit.
# Usage: . netns_star.sh; make_hosts N

skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root for network namespaces"
command -v ip > /dev/null || skip "needs iproute2 (ip)"
command -v unshare > /dev/null || skip "needs unshare (util-linux)"

tag="ath$$"
sw_ns="${tag}sw"
host_ns=() host_addr=()
host_cleanups=()
netns_cleanup() {
  local c ns
  for c in "${host_cleanups[@]}"; do eval "$c"; done
  for ns in "${host_ns[@]}" "$sw_ns"; do ip netns del "$ns" 2> /dev/null; done
}
trap netns_cleanup EXIT

make_hosts() {
  local n=$1 i ns
  ip netns add "$sw_ns" 2> /dev/null || skip "cannot create network namespaces here"
  ip -n "$sw_ns" link add br0 type bridge || skip "cannot create a bridge here"
  ip -n "$sw_ns" link set br0 up || skip "could not set up the switch"
  for ((i = 0; i < n; i++)); do
    ns="${tag}h$i"
    host_ns+=("$ns")
    host_addr+=("10.78.0.$((i + 1))")
    ip netns add "$ns" || skip "could not set up the namespaces"
    ip link add "${tag}h$i" type veth peer name "${tag}p$i" || skip "cannot create veth pairs here"
    ip link set "${tag}h$i" netns "$ns" && ip link set "${tag}p$i" netns "$sw_ns" ||
      skip "could not set up the namespaces"
    ip -n "$sw_ns" link set "${tag}p$i" master br0 && ip -n "$sw_ns" link set "${tag}p$i" up ||
      skip "could not attach host $i to the switch"
    ip -n "$ns" addr add "10.78.0.$((i + 1))/24" dev "${tag}h$i" && ip -n "$ns" link set "${tag}h$i" up &&
      ip -n "$ns" link set lo up || skip "could not set up the namespaces"
  done
  on_host "${host_ns[0]}" probe true 2> /dev/null || skip "cannot enter network or UTS namespaces here"
}

# on_host NS HOSTNAME CMD [ARGS...]: CMD in that network namespace, named HOSTNAME.
on_host() {
  local ns=$1 host=$2
  shift 2
  ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

# spawn_on_host NS HOSTNAME OUTFILE CMD [ARGS...]: the same in the background,
# output to OUTFILE; CMD is killed on exit.
spawn_on_host() {
  local ns=$1 host=$2 outfile=$3
  shift 3
  (exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@" \
     > "$outfile" 2>&1) &
  host_cleanups+=("kill $! 2> /dev/null")
}
