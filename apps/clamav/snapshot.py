#!/usr/bin/env python3
"""snapshot_cmd for clamd: a replica's recovery point is the signature set
it answers with.

    snapshot.py --data-dir DIR --out FILE

clamd keeps no state that a client request changes except which
signatures it has loaded: scans leave nothing behind, and RELOAD loads the
files of its database directory anew.  So a point is: clamd's VERSION, read
over the replica's local socket (DIR/clamd.sock, not replicated) while apus
holds the backup at one log entry, and the SHA-256 of every file in
DIR/db.  load.py checks a restarted node against it.

FILE holds "version <VERSION reply>" and one "<sha256> <file name>" line
per signature file, sorted by name; it is written to FILE.tmp, synced and
renamed over FILE.  Exits 1 (FILE untouched) when clamd does not answer.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clamd_client as cc  # noqa: E402
from signature_files import db_hashes  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", required=True, help="the node's data_dir")
    ap.add_argument("--out", required=True, help="the snapshot file (snapshot_file)")
    args = ap.parse_args()
    tmp = args.out + ".tmp"
    try:
        version = cc.ask(os.path.join(args.data_dir, "clamd.sock"), 0, b"VERSION", timeout=10)
        hashes = db_hashes(os.path.join(args.data_dir, "db"))
        with open(tmp, "w") as f:
            f.write("version %s\n" % version)
            for name, digest in hashes:
                f.write("%s %s\n" % (digest, name))
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, args.out)
    except (OSError, EOFError) as e:
        print("snapshot.py: %s: %s" % (args.data_dir, e), file=sys.stderr)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        sys.exit(1)
    print("%s, %d signature files" % (version, len(hashes)))


if __name__ == "__main__":
    main()
