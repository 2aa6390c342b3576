#!/usr/bin/env python3
"""Writes the bytes of apps/clamav's verify sweep (verify.bin, the config's
verify_cmd) to stdout:

    verify-sweep.py > verify.bin

One INSTREAM scan of a stream that carries the update's marker first and
then each shipped test signature's: clamd names the first signature it
finds, so a replica that loaded signatures/update/apus-update.ndb answers
"Apus.Test.Update" and one that did not answers with a shipped one.
Read-only: a scan changes nothing.  Every replica must answer the same
bytes (`apus verify`).  One command, not a session: clamd answers a
session's pipelined commands as its threads complete them, in an order of
each replica's own (README.md, "Sessions").
"""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clamd_client as cc  # noqa: E402

rng = random.Random(31)
data = b""
for m in [cc.UPDATE_MARKER[1]] + sorted(cc.MARKERS.values()):
    data += cc.payload(rng, 2048, m)
sys.stdout.buffer.write(cc.command_bytes(b"INSTREAM", data))
