"""The signature files of a clamd database directory, hashed: what
snapshot.py records in a recovery point and load.py checks."""

import hashlib
import os


def db_hashes(db_dir):
    """[(file name, SHA-256 hex)] of every plain file in db_dir, by name.
    clamd's own files there (its .clamav-tmp work folders) are left out."""
    out = []
    for name in sorted(os.listdir(db_dir)):
        path = os.path.join(db_dir, name)
        if name.startswith(".") or not os.path.isfile(path):
            continue
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        out.append((name, h.hexdigest()))
    return out
