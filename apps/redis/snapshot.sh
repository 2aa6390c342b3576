#!/bin/sh
# snapshot_cmd for Redis: a fork-based snapshot (BGSAVE) of the server
# behind the admin socket SOCK, waited for until dump.rdb is complete.
#
#   snapshot.sh SOCK
#
# apus ties the snapshot to a log entry at the server's fork (the leader is
# never paused; a backup holds only until the fork), so this makes the
# server fork once: BGSAVE, retried while another save runs or while the
# server still loads its dataset (a replica just rebuilt or restarted
# follows its log while Redis loads; BGSAVE then says LOADING).  Exits 0
# once that save succeeded, non-zero otherwise.
#
# An RDB holds the server's data, not what its clients were in the middle
# of: the bytes of a request it has read only in part (a pipelining
# client's read may end inside its next request), or a MULTI whose EXEC is
# still to come.  A node restarting from this point would replay the rest
# alone, and the request or transaction would be lost.  So BGSAVE goes in
# one write after CLIENT LIST: Redis runs both in one pass over our query
# buffer, no other client's input between them, and the list is the
# clients' state at the fork.  A client with bytes or arguments of a
# request not run yet (qbuf, argv-mem; not a blocked client: its command
# waits, read whole), or inside MULTI, makes this exit 75 (EX_TEMPFAIL)
# once the save is complete (python3 reads the replies): apus tries
# another entry soon, and after 5 s of such refusals in a row keeps the
# point anyway, with a warning.
# (A read ending inside a request's first header, "*3\r\n", leaves no
# trace in CLIENT LIST: apus's own check at the fork covers a client it
# had not answered yet.)
#
# The same list gives the clients' sessions at the fork: a client that
# SELECTed a database other than 0 is written to $APUS_SESSIONS_FILE as
# its descriptor and a SELECT, which a node restarting from this point
# sends first on its own connection for that client
# (coordinator/sessions.h).
#
# It never outlives its server for long: a server that stops answering
# (killed, or stopped by a signal) ends it within seconds, and it gives up
# after SNAPSHOT_TIMEOUT_S (600) seconds in all.
set -u
sock=${1:?usage: snapshot.sh SOCK}
limit=${SNAPSHOT_TIMEOUT_S:-600}
deadline=$(($(date +%s) + limit))
# A stopped server would hold redis-cli (it has no timeout of its own).
cli() { timeout 10 redis-cli -s "$sock" "$@"; }
# The system's python (a python3 earlier in PATH may be a version manager's shim).
python=python3
[ ! -x /usr/bin/python3 ] || python=/usr/bin/python3

# BGSAVE, sent with CLIENT LIST in one write.  Prints BGSAVE's reply on
# its first line, then one line per client caught between two parts of a
# request or inside a transaction.  (A save that cannot count is costly
# on a large dataset: the list is looked at first, for up to 200 ms, until
# no client is caught.  A held backup's clients do not move on.)
fork_listed() {
	timeout 10 "$python" -c '
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rb")
def reply():
    line = f.readline()
    if not line:
        sys.exit("the server closed the connection")
    kind, rest = line[:1], line[1:].rstrip(b"\r\n").decode()
    if kind == b"$":
        return f.read(int(rest) + 2)[:-2].decode() if int(rest) >= 0 else ""
    return rest
def caught(clients):
    for line in clients.splitlines():
        c = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if c.get("id") == me:
            continue
        if int(c.get("multi", -1)) >= 0:
            yield "client %s (%s) is inside MULTI, %s command(s) queued" % (c["id"], c["addr"], c["multi"])
        elif "b" not in c.get("flags", "") and (int(c.get("qbuf", 0)) or int(c.get("argv-mem", 0))):
            yield "client %s (%s) has a request read in part (qbuf=%s argv-mem=%s)" % (
                c["id"], c["addr"], c["qbuf"], c["argv-mem"])
s.sendall(b"CLIENT ID\r\n")
me = reply()
for _ in range(10):
    s.sendall(b"CLIENT LIST\r\n")
    if not any(caught(reply())):
        break
    time.sleep(0.02)
s.sendall(b"CLIENT LIST\r\nBGSAVE\r\n")
clients, bgsave = reply(), reply()
print(bgsave)
for why in caught(clients):
    print(why)
sessions = os.environ.get("APUS_SESSIONS_FILE")
if sessions:
    with open(sessions, "w") as out:
        for line in clients.splitlines():
            c = dict(w.split("=", 1) for w in line.split() if "=" in w)
            if c.get("id") != me and int(c.get("fd", -1)) >= 0 and c.get("db", "0") != "0":
                db = c["db"].encode()
                out.write("%s %s\n" % (c["fd"], (b"*2\r\n$6\r\nSELECT\r\n$%d\r\n%s\r\n" % (len(db), db)).hex()))
' "$sock"
}

tries=0
while :; do
	listed=$(fork_listed) ||
		{ echo "snapshot.sh: BGSAVE: the server does not answer: $listed" >&2; exit 1; }
	out=$(printf '%s\n' "$listed" | head -n 1)
	[ "$out" != "Background saving started" ] || break
	case $out in
	*"in progress"* | LOADING* | *"Another child process is active"*) ;;
	*) echo "snapshot.sh: BGSAVE: $out" >&2; exit 1 ;;
	esac
	tries=$((tries + 1))
	[ $tries -lt 600 ] || { echo "snapshot.sh: BGSAVE: $out (for 30 s)" >&2; exit 1; }
	sleep 0.05
done
gone=0
while :; do
	if info=$(cli INFO persistence); then
		gone=0
	else
		gone=$((gone + 1))
		[ $gone -lt 3 ] || { echo "snapshot.sh: the server does not answer: $info" >&2; exit 1; }
	fi
	state=$(printf '%s\n' "$info" | tr -d '\r' | grep -E '^rdb_(bgsave_in_progress|last_bgsave_status):')
	case $state in
	*"in_progress:0"*"status:ok"*) break ;;
	*"in_progress:0"*) echo "snapshot.sh: BGSAVE failed" >&2; exit 1 ;;
	esac
	[ "$(date +%s)" -lt "$deadline" ] || { echo "snapshot.sh: BGSAVE did not finish in $limit s" >&2; exit 1; }
	sleep 0.02
done
cut=$(printf '%s\n' "$listed" | tail -n +2)
[ -n "$cut" ] || exit 0
printf 'snapshot.sh: not a recovery point: %s\n' "$cut" | head -n 4 >&2
exit 75
