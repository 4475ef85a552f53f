#!/usr/bin/env bash
# Makes "hosts" out of network namespaces on this machine, so that kolo can be run and broken
# across hosts without a second machine.
#
#   netns-hosts.sh up [--hosts N] [--delay MS] [--jitter MS] [--loss PCT] [--reorder PCT]
#                     [--duplicate PCT] [--rate MBIT] [--seed S]
#   netns-hosts.sh down                 remove everything up made (also what a killed run left)
#   netns-hosts.sh exec HOST cmd...     run cmd on HOST (kolo-h1, h1 or 1)
#   netns-hosts.sh addr HOST            print HOST's address
#   netns-hosts.sh cut HOST | heal HOST take HOST's link down / up at the switch (a pulled cable)
#   netns-hosts.sh crash HOST           HOST vanishes: link gone, its processes SIGKILLed, namespace deleted
#   netns-hosts.sh stats                the impairing switch's counters (JSON)
#   netns-hosts.sh status
#
# Layout: hosts $P-h0..h{N-1} (P=$NETNS_PREFIX, default "kolo"), each with lo and eth0 =
# 10.77.0.(10+i)/24, and a switch namespace $P-sw holding the other veth ends p0..p{N-1}. They
# are joined by a kernel bridge, or, when any impairment is asked, by netem_switch.py (this
# kernel has no sch_netem). --rate alone uses tbf on the switch ports. Every host gets an
# /etc/hosts (ip netns exec mounts /etc/netns/$P-hI/hosts over it) naming all hosts, so host
# names resolve as on a cluster. The hosts share the machine's hostname, boot id and /dev/shm:
# only their network namespace tells them apart. Nothing is routed outside 10.77.0.0/24.
set -euo pipefail

PREFIX=${NETNS_PREFIX:-kolo}
SW="$PREFIX-sw"
STATE="/run/$PREFIX-netns"
HERE="$(cd "$(dirname "$0")" && pwd)"
SUBNET=10.77.0

die() { echo "netns-hosts: $*" >&2; exit 1; }

host_name() {  # kolo-h1 | h1 | 1 -> kolo-h1
  local h=$1
  case "$h" in
    "$PREFIX"-h[0-9]*) echo "$h" ;;
    h[0-9]*) echo "$PREFIX-$h" ;;
    [0-9]*) echo "$PREFIX-h$h" ;;
    *) die "unknown host '$h' (want $PREFIX-hN, hN or N)" ;;
  esac
}
host_index() { local n; n=$(host_name "$1"); echo "${n##*-h}"; }

our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$PREFIX-(h[0-9]+|sw)\$" || true; }

stop_switch() {
  local pidfile="$STATE/switch.pid" pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  # Only the process we started: its command line names the switch script.
  if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q netem_switch.py; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

down() {
  stop_switch
  local ns pid
  for ns in $(our_namespaces); do
    # Processes still inside a host keep its namespace (and sockets) alive after the delete.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
  done
  rm -rf /etc/netns/"$PREFIX"-h[0-9]* "$STATE" 2>/dev/null || true
}

no_offloads() {  # frames must stay <= MTU with real checksums to pass through a packet socket
  ip netns exec "$1" ethtool -K "$2" tx off rx off tso off gso off gro off >/dev/null 2>&1 ||
    die "ethtool -K $2 failed in $1 (is ethtool installed?)"
}

up() {
  local n=4 delay=0 jitter=0 loss=0 reorder=0 dup=0 rate=0 seed=1
  while [ $# -gt 0 ]; do
    case "$1" in
      --hosts) n=$2; shift 2 ;;
      --delay) delay=$2; shift 2 ;;
      --jitter) jitter=$2; shift 2 ;;
      --loss) loss=$2; shift 2 ;;
      --reorder) reorder=$2; shift 2 ;;
      --duplicate) dup=$2; shift 2 ;;
      --rate) rate=$2; shift 2 ;;
      --seed) seed=$2; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "--hosts wants 1..200"
  local impaired=0
  for v in "$delay" "$jitter" "$loss" "$reorder" "$dup"; do
    awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' && impaired=1
  done
  down
  mkdir -p "$STATE"
  ip netns add "$SW"
  ip -n "$SW" link set lo up
  if [ "$impaired" -eq 0 ]; then
    ip -n "$SW" link add br0 type bridge
    ip -n "$SW" link set br0 up
  fi
  local i hosts_file=$STATE/hosts ports=""
  printf '127.0.0.1 localhost\n' > "$hosts_file"
  for ((i = 0; i < n; i++)); do printf '%s.%d %s-h%d\n' "$SUBNET" $((10 + i)) "$PREFIX" "$i" >> "$hosts_file"; done
  for ((i = 0; i < n; i++)); do
    local h="$PREFIX-h$i"
    ip netns add "$h"
    ip -n "$h" link set lo up
    # Made inside the host, so that nothing ever appears in the machine's own namespace.
    ip -n "$h" link add eth0 type veth peer name "p$i" netns "$SW"
    ip -n "$h" addr add "$SUBNET.$((10 + i))/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$SW" link set "p$i" up
    if [ "$impaired" -eq 0 ]; then
      ip -n "$SW" link set "p$i" master br0
    else
      ip -n "$SW" link set "p$i" promisc on
      no_offloads "$h" eth0
      no_offloads "$SW" "p$i"
    fi
    if awk -v v="$rate" 'BEGIN { exit !(v + 0 > 0) }' && [ "$impaired" -eq 0 ]; then
      ip netns exec "$SW" tc qdisc add dev "p$i" root tbf rate "${rate}mbit" burst 32kbit latency 400ms
    fi
    mkdir -p "/etc/netns/$h"
    cp "$hosts_file" "/etc/netns/$h/hosts"
    # No DNS server but loopback's (none): a name outside the list fails at once, and no query
    # can leave for a real resolver.
    : > "/etc/netns/$h/resolv.conf"
    ports+="${ports:+,}p$i"
  done
  if [ "$impaired" -eq 1 ]; then
    rm -f "$STATE/switch.ready"
    ip netns exec "$SW" python3 "$HERE/netem_switch.py" --ports "$ports" --delay-ms "$delay" \
      --jitter-ms "$jitter" --loss "$loss" --reorder "$reorder" --duplicate "$dup" --rate-mbit "$rate" \
      --seed "$seed" --stats "$STATE/switch.json" --ready "$STATE/switch.ready" \
      > "$STATE/switch.log" 2>&1 &
    echo $! > "$STATE/switch.pid"
    for _ in $(seq 100); do [ -f "$STATE/switch.ready" ] && break; sleep 0.05; done
    [ -f "$STATE/switch.ready" ] || { cat "$STATE/switch.log" >&2; die "the switch did not start"; }
  fi
  echo "n=$n delay=$delay jitter=$jitter loss=$loss reorder=$reorder duplicate=$dup rate=$rate seed=$seed" > "$STATE/settings"
  # Every host must reach every other before anyone uses them (ARP through a lossy switch
  # can take a few tries).
  for ((i = 1; i < n; i++)); do
    ip netns exec "$PREFIX-h0" python3 "$HERE/reach.py" "$SUBNET.$((10 + i))" 10 ||
      die "$PREFIX-h0 cannot reach $PREFIX-h$i"
  done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  up) up "$@" ;;
  down) down ;;
  exec)
    [ $# -ge 2 ] || die "exec HOST cmd..."
    h=$(host_name "$1"); shift
    exec ip netns exec "$h" "$@" ;;
  addr) echo "$SUBNET.$((10 + $(host_index "$1")))" ;;
  cut) ip -n "$SW" link set "p$(host_index "$1")" down ;;
  heal) ip -n "$SW" link set "p$(host_index "$1")" up ;;
  crash)
    h=$(host_name "$1")
    # The cable first, so that dying sockets cannot send a FIN or RST: peers see silence, as
    # when a machine loses power.
    ip -n "$SW" link set "p$(host_index "$1")" down
    ip -n "$h" link del eth0 2>/dev/null || true
    for pid in $(ip netns pids "$h" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$h" ;;
  stats) cat "$STATE/switch.json" 2>/dev/null || echo '{}' ;;
  status) cat "$STATE/settings" 2>/dev/null || echo "down"; our_namespaces ;;
  *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; [ -z "$cmd" ] || exit 2 ;;
esac
