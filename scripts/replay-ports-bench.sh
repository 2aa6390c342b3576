#!/usr/bin/env bash
# How long a replay connection's local port takes to get, once TIME_WAIT
# crowds the ephemeral range (issue 18's slow catch-up; see doc/limits.md):
# bind() to port 0 (what replay did), bind() with IP_BIND_ADDRESS_NO_PORT
# and the port left to connect() (what it does now), and connect() alone.
# Runs in a network namespace of its own (root), so that its TIME_WAIT
# sockets never touch the host's port range.
#
#   scripts/replay-ports-bench.sh [TIME_WAIT_SOCKETS] [CONNECTIONS_PER_ROUND]
#
# Defaults: 19000 TIME_WAIT sockets (what failover.bats leaves), 500
# connections per round, three rounds of each way side by side.  Twice: with
# the TIME_WAIT sockets left by connections bound to port 0 first (the old
# replay's own), then by connections whose port connect() chose (the new
# replay's, and most clients').  Prints microseconds per connection
# (connect + accept + close included).
set -euo pipefail
tw=${1:-19000}
per=${2:-500}
[ "$(id -u)" -eq 0 ] || { echo "replay-ports-bench: needs root (ip netns)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "replay-ports-bench: needs python3" >&2; exit 2; }
ns=apus-ports-bench-$$
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
for left_by in "bind(0)" "connect"; do
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" python3 - "$tw" "$per" "$left_by" <<'PY'
import socket, sys, time
tw, per, left_by = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
IP_BIND_ADDRESS_NO_PORT = 24
L = socket.socket()
L.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
L.bind(("127.0.0.1", 5555))
L.listen(4096)
# The client ends first, as replay does: its side keeps the TIME_WAIT.
for _ in range(tw):
    c = socket.socket()
    if left_by == "bind(0)":
        c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        c.bind(("127.0.0.1", 0))
    c.connect(("127.0.0.1", 5555))
    s, _ = L.accept()
    c.close()
    s.close()
def rnd(way):
    t = time.perf_counter()
    pairs = []
    for _ in range(per):
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if way == "bind(0)":
            c.bind(("127.0.0.1", 0))
        elif way == "bind, port at connect":
            c.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            c.bind(("127.0.0.1", 0))
        c.connect(("127.0.0.1", 5555))
        s, _ = L.accept()
        pairs.append((c, s))
    dt = (time.perf_counter() - t) / per * 1e6
    for c, s in pairs:
        c.close()
        s.close()
    return dt
ways = ["bind(0)", "bind, port at connect", "connect alone"]
res = {w: [] for w in ways}
for _ in range(3):
    for w in ways:
        res[w].append(rnd(w))
print("%d TIME_WAIT sockets left by %s connections; %d connections per round, "
      "us per connection:" % (tw, left_by, per))
for w in ways:
    print("  %-22s %s" % (w, "  ".join("%8.1f" % x for x in res[w])))
PY
ip netns del "$ns"
done
