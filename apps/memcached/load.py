#!/usr/bin/env python3
"""snapshot_load_cmd for memcached: puts a snapshot.py file into a replica's
server over its admin port.

    load.py [--host H] --port ADMIN_PORT --in FILE [--wait-s S]

apus runs it when a node starts from a recovery point, once its memcached
listens and before the node executes any log entry after that point.  It
waits up to --wait-s (default 30) for the server to answer, then sends
FILE's set requests, 100 at a time, and checks that each was STORED.  It
may run twice (apus retries a failed load): a set overwrites.  Prints
"<items> items loaded"; exits 1 when a request fails or the server cannot
be reached.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workload import Conn  # noqa: E402

BATCH = 100  # requests sent before their replies are read


def records(path):
    """The set requests of a snapshot file, as bytes, one at a time."""
    with open(path, "rb") as f:
        while True:
            head = f.readline()
            if not head:
                return
            parts = head.split()
            if len(parts) != 5 or parts[0] != b"set" or not head.endswith(b"\r\n"):
                raise ValueError("%s: not a snapshot.py record: %r" % (path, head[:80]))
            body = f.read(int(parts[4]) + 2)
            if len(body) != int(parts[4]) + 2 or not body.endswith(b"\r\n"):
                raise ValueError("%s: the value of %r is cut short" % (path, parts[1]))
            yield head + body


def connect(host, port, wait_s):
    deadline = time.monotonic() + wait_s
    while True:
        try:
            c = Conn(host, port, timeout=30)
            c.send(b"version\r\n")
            if c.line().startswith("VERSION"):
                return c
            c.close()
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise ConnectionError("no memcached answers on %s:%d" % (host, port))
        time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True, help="the replica's admin port")
    ap.add_argument("--in", dest="path", required=True, help="the snapshot file")
    ap.add_argument("--wait-s", type=float, default=30.0)
    args = ap.parse_args()
    loaded = 0
    try:
        c = connect(args.host, args.port, args.wait_s)
        batch = []
        for rec in records(args.path):
            batch.append(rec)
            if len(batch) == BATCH:
                loaded += send(c, batch)
                batch = []
        loaded += send(c, batch)
        c.close()
    except Exception as e:  # noqa: BLE001 - any failure means not loaded
        print("load.py: %s:%d: %s" % (args.host, args.port, e), file=sys.stderr)
        sys.exit(1)
    print("%d items loaded" % loaded)


def send(c, batch):
    if not batch:
        return 0
    c.send(b"".join(batch))
    for rec in batch:
        line = c.line()
        if line != "STORED":
            raise ValueError("%s: %s" % (rec.split(b" ", 2)[1].decode("latin-1"), line))
    return len(batch)


if __name__ == "__main__":
    main()
