#!/usr/bin/env python3
"""Concurrent scans against clamd: the load apps/clamav is tested with.

    workload.py [--host H] --port PORT [--clients N] [--scans M]
                [--session-every K] [--size BYTES] [--seed S] [--update]

N clients (20) each run M scans (25) over INSTREAM, the way
`clamdscan --stream` sends a file: a payload of about BYTES (16384) random
text, a third of them carrying one of the shipped test signatures
(clamd_client.MARKERS).  Most scans take a connection of their own; every
K-th (5) opens an IDSESSION and sends PING, VERSION and three scans on it,
then END, each command sent once the one before was answered.  Every reply is checked against what a replica with the shipped
signatures must answer; with --update the Apus.Test.Update signature
(signatures/update/apus-update.ndb) must be found too, and a third of the payloads
carry it.

Prints one line per client that saw a wrong answer, then a summary
"<scans> scans, <found> found, <wrong> wrong answers, <failed> failed
connections" (with --stats, also scans per second and the latency of
single scans); exits 0 when every answer was right and no connection
failed, 1 otherwise.  The same --seed gives the same payloads.
"""

import argparse
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clamd_client as cc  # noqa: E402


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.scans = self.found = self.wrong = self.failed = 0
        self.latencies = []

    def took(self, seconds):
        with self.lock:
            self.latencies.append(seconds)

    def add(self, **counts):
        with self.lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)


def pick(rng, update):
    """(the payload's marker bytes or None, the signature name or None)."""
    names = list(cc.MARKERS)
    if update:
        names.append(cc.UPDATE_MARKER[0])
    r = rng.randrange(3 * len(names))
    if r >= len(names):
        return None, None
    name = names[r]
    marker = cc.UPDATE_MARKER[1] if name == cc.UPDATE_MARKER[0] else cc.MARKERS[name]
    return marker, name


def one_scan(args, rng, tally, who):
    marker, name = pick(rng, args.update)
    data = cc.payload(rng, args.size + rng.randrange(args.size), marker)
    t0 = time.monotonic()
    reply = cc.ask(args.host, args.port, b"INSTREAM", data)
    tally.took(time.monotonic() - t0)
    want = cc.expected_reply(name)
    tally.add(scans=1, found=int(name is not None))
    if reply != want:
        tally.add(wrong=1)
        print("%s: scan answered %r, expected %r" % (who, reply, want))


def one_session(args, rng, tally, who):
    cmds, wants = [b"PING", b"VERSION"], ["PONG", None]
    scans = []
    for _ in range(3):
        marker, name = pick(rng, args.update)
        scans.append(cc.payload(rng, args.size, marker))
        wants.append(cc.expected_reply(name))
        tally.add(scans=1, found=int(name is not None))
    # One command at a time, each sent once the one before was answered:
    # clamd runs a session's commands on its pool threads at once and
    # answers them as they complete, so pipelined commands get their
    # replies in an order of that replica's own (README.md, "Sessions").
    with cc.connect(args.host, args.port) as s:
        s.sendall(cc.command_bytes(b"IDSESSION"))
        for i, (cmd, want) in enumerate(zip(cmds + [b"INSTREAM"] * 3, wants), start=1):
            data = scans[i - 3] if cmd == b"INSTREAM" else None
            s.sendall(cc.command_bytes(cmd, data))
            reply, rest = cc.read_reply(s)
            expect = "%d: %s" % (i, want)
            if rest or (reply != expect if want is not None else not reply.startswith("%d: " % i)):
                tally.add(wrong=1)
                print("%s: session reply %d was %r, expected %r" % (who, i, reply, expect))
        s.sendall(cc.command_bytes(b"END"))


def client(args, c, tally):
    rng = random.Random("%d/%d" % (args.seed, c))
    who = "client %d" % c
    for j in range(args.scans):
        try:
            if args.session_every and j % args.session_every == args.session_every - 1:
                one_session(args, rng, tally, who)
            else:
                one_scan(args, rng, tally, who)
        except (OSError, EOFError) as e:
            tally.add(failed=1)
            print("%s: %s" % (who, e))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--scans", type=int, default=25, help="scans per client")
    ap.add_argument("--session-every", type=int, default=5,
                    help="every K-th scan is an IDSESSION of 3 scans (0: never)")
    ap.add_argument("--size", type=int, default=16384, help="payload bytes, at least")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stats", action="store_true",
                    help="also print scans/s and the latency of single scans")
    ap.add_argument("--update", action="store_true",
                    help="the replicas also hold signatures/apus-update.ndb")
    args = ap.parse_args()
    if args.clients < 1 or args.scans < 1 or args.size < 64:
        ap.error("--clients and --scans must be at least 1, --size at least 64")
    tally = Tally()
    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(args, c, tally)) for c in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    print("%d scans, %d found, %d wrong answers, %d failed connections"
          % (tally.scans, tally.found, tally.wrong, tally.failed))
    if args.stats and tally.latencies:
        lat = sorted(tally.latencies)
        pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
        print("stats: %.0f scans/s, single scans p50 %.2f ms, p99 %.2f ms (%d scans in %.2f s)"
              % (tally.scans / elapsed, pct(0.50), pct(0.99), tally.scans, elapsed))
    sys.exit(0 if tally.wrong == 0 and tally.failed == 0 else 1)


if __name__ == "__main__":
    main()
