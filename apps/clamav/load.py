#!/usr/bin/env python3
"""snapshot_load_cmd for clamd: checks that a node starting from a recovery
point answers with the signatures the point was taken with.

    load.py --data-dir DIR --in FILE [--wait-s S]

clamd loads its signatures from DIR/db at start, so there is nothing to
put into it (snapshot.py says why a point is only its signature set).
What can be wrong is DIR/db: signature files changed on this node alone,
or changed on every node while this one was down (then it must load what
the others had at the point, and the log's RELOAD after it brings the new
set).  So load.py waits up to --wait-s (default 30) for clamd to answer
on DIR/clamd.sock, then compares DIR/db's files with the point's and
clamd's VERSION with the point's.  Exit 0 when they agree; 1, naming each
file that differs, when they do not (apus retries the load with back-off
and `apus status` shows the node waiting): put the point's files back in
DIR/db, or rebuild the node from a peer (`apus rebuild`).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clamd_client as cc  # noqa: E402
from signature_files import db_hashes  # noqa: E402


def read_point(path):
    """(VERSION at the point, {file name: sha256})."""
    version, files = None, {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("version "):
                version = line[len("version "):]
            elif line:
                digest, _, name = line.partition(" ")
                files[name] = digest
    if version is None:
        raise ValueError("%s: not a snapshot.py file (no version line)" % path)
    return version, files


def wait_version(sock, wait_s):
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return cc.ask(sock, 0, b"VERSION", timeout=5)
        except (OSError, EOFError) as e:
            if time.monotonic() >= deadline:
                raise OSError("clamd did not answer on %s for %g s: %s" % (sock, wait_s, e))
            time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", required=True, help="the node's data_dir")
    ap.add_argument("--in", dest="inp", required=True, help="the snapshot file")
    ap.add_argument("--wait-s", type=float, default=30.0)
    args = ap.parse_args()
    try:
        want_version, want = read_point(args.inp)
        version = wait_version(os.path.join(args.data_dir, "clamd.sock"), args.wait_s)
        have = dict(db_hashes(os.path.join(args.data_dir, "db")))
    except (OSError, EOFError, ValueError) as e:
        print("load.py: %s" % e, file=sys.stderr)
        sys.exit(1)
    wrong = sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))
    for name in wrong:
        print("load.py: %s/db/%s is %s at the point and %s here" % (
            args.data_dir, name, "absent" if name not in want else "sha256 " + want[name][:12],
            "absent" if name not in have else "sha256 " + have[name][:12]), file=sys.stderr)
    if version != want_version:
        print("load.py: clamd answers VERSION %r, the point %r" % (version, want_version), file=sys.stderr)
    if wrong or version != want_version:
        sys.exit(1)
    print("%s, %d signature files as at the point" % (version, len(want)))


if __name__ == "__main__":
    main()
