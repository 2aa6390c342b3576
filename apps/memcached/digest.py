#!/usr/bin/env python3
"""One digest of a memcached replica's data, read over its admin port.

    digest.py [--host H] --port ADMIN_PORT [--keys K] [--prefix P] [--key NAME ...]
    digest.py [--host H] --port ADMIN_PORT --all
    (--dump: also every item, "key flags value" a line, before the digest;
     --cas: read with gets, and each item's CAS value is part of the digest)

Prints "<sha256> <keys present>": the SHA-256 of "key value flags\\n" for
every present key, in the order of the keys' names (bytes), so that both
ways of naming the keys below give the same digest of the same data.  The key space is the workload's
(workload.py): <prefix>:0 .. <prefix>:K-1 (--keys, default 1000, --prefix,
default "key"), plus every --key NAME; or, with --all, every key the
server holds (listed with `lru_crawler metadump hash`, then read with get),
whatever its name.

Read a replica over its admin port (a listener that is not the app_port:
apps/memcached/cluster-shm.conf gives each one 127.0.0.1:1731<node>), never
its application port: a backup refuses clients there, and a get through the
leader's app port would go into the log.  Replicas agree when their digests
are equal.  A get changes nothing a digest sees (only the item's last
access time).  Exits 1 when the server cannot be read.
"""

import argparse
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workload import Conn, get_each, key_name, metadump  # noqa: E402  (the shared key naming)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True, help="the replica's admin port")
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--prefix", default="key")
    ap.add_argument("--key", action="append", default=[], help="one more key (repeatable)")
    ap.add_argument("--all", action="store_true", help="every key the server holds")
    ap.add_argument("--dump", action="store_true", help="print every item read, a line each")
    ap.add_argument("--cas", action="store_true", help="the items' CAS values count too (gets)")
    args = ap.parse_args()
    try:
        c = Conn(args.host, args.port, timeout=30)
        if args.all:
            names = sorted(set(key for key, _ in metadump(c)))
        else:
            names = sorted(set([key_name(args.prefix, i) for i in range(args.keys)] + args.key))
        h = hashlib.sha256()
        present = 0
        for k, item in get_each(c, names, cas=args.cas):
            flags, val = item[:2]
            h.update(b"%s %s %d\n" % (k.encode(), val, flags))
            if args.cas:
                h.update(b"cas %d\n" % item[2])
            if args.dump:
                print("%s %d %s" % (k, flags, val.decode("latin-1")))
            present += 1
        c.close()
    except Exception as e:  # noqa: BLE001 - any failure means no digest
        print("digest.py: %s:%d: %s" % (args.host, args.port, e), file=sys.stderr)
        sys.exit(1)
    print("%s %d" % (h.hexdigest(), present))


if __name__ == "__main__":
    main()
