#!/usr/bin/env python3
"""A memcached client that remembers what it was promised, for fault tests.

    audit.py write (--config C | --host H --port P) --log FILE [--count N]
                   [--prefix P] [--pause-ms MS]
        First `add <prefix>:ctr 0` (the counter incr needs), then N times
        (default 1000): `set <prefix>:<i> <i>`, then `incr <prefix>:ctr 1`.
        Logs "set <key> <value>" for every STORED, "incr <value>" for every
        incr answered with the counter's new value, "fail ..." for the
        others, and goes on.  With --config the leader is found with `apus
        status --json` (APUS_BIN, default build/bin/apus) at the start and
        after every failed request, so the writer follows failovers.
        --pause-ms: sleep this long after each set+incr (default 0), to
        spread the writes over a fault.
    audit.py check --host H --port P --log FILE [--prefix P]
        Reads H:P (a replica's admin port): every acknowledged set is
        present with its value, and the counter is at least the largest
        acknowledged incr value (an incr whose answer was lost may have
        happened) and at most the number of incrs attempted.  Prints one
        line; exits 0 when clean, 1 with the problems otherwise.

One request at a time on one connection (a new one after a failure), with a
5 s timeout per request.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workload import Conn  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def find_leader(config):
    """(host, port) of the leader per apus status, or None."""
    apus = os.environ.get("APUS_BIN") or os.path.join(ROOT, "build", "bin", "apus")
    try:
        out = subprocess.run([apus, "status", "--config", config, "--json"],
                             capture_output=True, timeout=10, check=False).stdout
        st = json.loads(out)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    lid = st.get("leader")
    for n in st.get("nodes", []):
        if lid is not None and n.get("id") == lid and n.get("app_addr"):
            host, _, port = n["app_addr"].rpartition(":")
            return host, int(port)
    return None


class Writer:
    def __init__(self, args):
        self.args = args
        self.addr = (args.host, args.port) if args.port else None
        self.conn = None

    def follow(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.args.config:
            for _ in range(50):
                a = find_leader(self.args.config)
                if a:
                    self.addr = a
                    return
                time.sleep(0.1)

    def request(self, data):
        """The reply line to DATA; raises on a broken link or timeout."""
        if self.conn is None:
            if self.addr is None:
                raise ConnectionError("no leader known")
            self.conn = Conn(self.addr[0], self.addr[1], timeout=5)
        self.conn.send(data)
        return self.conn.line()


def write(args):
    w = Writer(args)
    w.follow()
    p = args.prefix
    with open(args.log, "a", buffering=1) as log:
        def req(what, data):
            try:
                return w.request(data)
            except Exception as e:  # noqa: BLE001 - any failure: log, find the leader
                log.write("fail %s %s\n" % (what, str(e).replace("\n", " ")))
                w.follow()
                return None

        for _ in range(20):
            r = req("add", b"add %s:ctr 0 0 1\r\n0\r\n" % p.encode())
            if r in ("STORED", "NOT_STORED"):
                break
            time.sleep(0.2)
        for i in range(1, args.count + 1):
            key, val = "%s:%d" % (p, i), str(i).encode()
            r = req("set %s" % key, b"set %s 0 0 %d\r\n%s\r\n" % (key.encode(), len(val), val))
            if r == "STORED":
                log.write("set %s %d\n" % (key, i))
            elif r is not None:
                log.write("fail set %s %s\n" % (key, r))
                w.follow()
            r = req("incr", b"incr %s:ctr 1\r\n" % p.encode())
            if r is not None and r.isdigit():
                log.write("incr %s\n" % r)
            elif r is not None:
                log.write("fail incr %s\n" % r)
                w.follow()
            if args.pause_ms:
                time.sleep(args.pause_ms / 1000.0)
    return 0


def check(args):
    sets, incr_max, incrs_tried = [], 0, 0
    with open(args.log) as f:
        for line in f:
            m = re.match(r"^set (\S+) (\d+)$", line)
            if m:
                sets.append((m.group(1), m.group(2).encode()))
            elif re.match(r"^incr \d+$", line):
                incr_max = max(incr_max, int(line.split()[1]))
                incrs_tried += 1
            elif line.startswith("fail incr"):
                incrs_tried += 1
    c = Conn(args.host, args.port, timeout=30)
    problems = []
    for b in range(0, len(sets), 100):
        batch = sets[b:b + 100]
        found = c.get_multi([k for k, _ in batch])
        for k, v in batch:
            got = found.get(k, (None, None))[1]
            if got != v:
                problems.append("missing: %s (got %r, want %r)" % (k, got, v))
    ctr = c.get_multi(["%s:ctr" % args.prefix]).get("%s:ctr" % args.prefix, (0, b"0"))[1]
    ctr = int(ctr) if ctr.isdigit() else 0
    c.close()
    if ctr < incr_max or ctr > incrs_tried:
        problems.append("counter %d outside [largest acknowledged %d, attempted %d]"
                        % (ctr, incr_max, incrs_tried))
    for p in problems[:20]:
        print(p)
    print("audit: %d acknowledged sets, %d problem(s); counter %d (largest acknowledged %d, attempted %d)"
          % (len(sets), len(problems), ctr, incr_max, incrs_tried))
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=("write", "check"))
    ap.add_argument("--config")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int)
    ap.add_argument("--log", required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--prefix", default="audit")
    ap.add_argument("--pause-ms", type=float, default=0)
    args = ap.parse_args()
    if args.cmd == "write" and not (args.config or args.port):
        ap.error("write needs --config or --port")
    if args.cmd == "check" and not args.port:
        ap.error("check needs --port")
    sys.exit(write(args) if args.cmd == "write" else check(args))


if __name__ == "__main__":
    main()
