#!/usr/bin/env python3
"""snapshot_cmd for memcached: every item of a replica, read over its admin
port, into one file that load.py puts back.

    snapshot.py [--host H] --port ADMIN_PORT --out FILE

memcached has no dump command and no fork, so this reads the server item by
item: the state it reads is one log entry's only because apus holds the
replica's execution while it runs, which it does on a backup alone (hence
`snapshot_leader = off` in apps/memcached/cluster-*.conf: the leader takes
no snapshots).  Items are listed with `lru_crawler metadump hash` and read
with get; an item listed but gone by its get (expired) is left out.

FILE holds one memcached `set` request per item, sorted by key:

    set <key> <flags> <exptime> <bytes>\\r\\n<value>\\r\\n

(exptime absolute, 0 for none), written to FILE.tmp, synced, and renamed
over FILE, so FILE is always a whole snapshot.  CAS values are not kept: a
loaded item gets a new one from its server's counter.  Prints "<items>
items, <bytes> bytes"; exits 1 (FILE untouched) when the server cannot be
read.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workload import Conn, get_each, metadump  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True, help="the replica's admin port")
    ap.add_argument("--out", required=True, help="the snapshot file (snapshot_file)")
    args = ap.parse_args()
    tmp = args.out + ".tmp"
    items = size = 0
    try:
        c = Conn(args.host, args.port, timeout=30)
        expiry = dict(metadump(c))
        with open(tmp, "wb") as f:
            for key, (flags, value) in get_each(c, sorted(expiry)):
                f.write(b"set %s %d %d %d\r\n%s\r\n" % (
                    key.encode("latin-1"), flags, max(expiry[key], 0), len(value), value))
                items += 1
                size += len(value)
            f.flush()
            os.fsync(f.fileno())
        c.close()
        os.rename(tmp, args.out)
    except Exception as e:  # noqa: BLE001 - any failure means no snapshot
        print("snapshot.py: %s:%d: %s" % (args.host, args.port, e), file=sys.stderr)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        sys.exit(1)
    print("%d items, %d bytes" % (items, size))


if __name__ == "__main__":
    main()
