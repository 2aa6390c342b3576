#!/usr/bin/env python3
"""Hostile clients of a replicated server, for tests/bats/hostile.bats.
Each command prints one line of what it did; exit 0 when it could do it,
1 when the server did something it must not, 3 on an unexpected error,
77 when the machine cannot do it (the line says why)."""
import argparse
import os
import select
import signal
import socket
import struct
import sys
import time

TCP_REPAIR = 19  # linux/tcp.h


def conn(args, linger0=False):
    s = socket.create_connection((args.host, args.port), timeout=10)
    if linger0:
        # An abortive close (RST): no TIME_WAIT left on this side.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return s


def cmd_bulk(args):
    """SET k <1 GB bulk>: the header, then data until the server closes or
    --max bytes went out.  Prints the bytes sent and the server's reply."""
    s = conn(args)
    s.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n" % (len(args.key), args.key.encode(), args.size))
    chunk = b"x" * 65536
    sent, reply, t_end = 0, b"", time.time() + args.seconds
    s.setblocking(False)
    closed = False
    while sent < args.max and time.time() < t_end:
        r, w, _ = select.select([s], [s], [], 1)
        if r:
            try:
                d = s.recv(4096)
            except ConnectionResetError:
                closed = True
                break
            if not d:
                closed = True
                break
            reply += d
        if w:
            try:
                sent += s.send(chunk)
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            except BlockingIOError:
                pass
    s.close()
    print("sent %d bytes, server %s, reply %r" % (sent, "closed" if closed else "kept reading", reply[:80]))
    return 0


def cmd_churn(args):
    """Opens and closes --count connections, --workers processes each one
    after another (every --every-th sends PING and wants PONG), within
    --seconds; half of them end with RST, half with FIN."""
    if args.workers > 1:
        pids, share = [], args.count // args.workers
        rfd, wfd = os.pipe()
        for w in range(args.workers):
            pid = os.fork()
            if pid == 0:
                os.close(rfd)
                args.workers, args.count = 1, share
                rc = churn_one(args, wfd)
                os._exit(rc)
            pids.append(pid)
        os.close(wfd)
        rc = 0
        for pid in pids:
            rc |= os.waitpid(pid, 0)[1]
        counts = os.read(rfd, 65536).split()
        n = sum(int(c) for c in counts[0::2])
        pings = sum(int(c) for c in counts[1::2])
    else:
        rc, n, pings = churn_one(args, None), 0, 0
        return rc
    print("%d connections opened and closed by %d workers (%d answered PING)" % (n, len(pids), pings))
    return 1 if rc else 0


def churn_one(args, report):
    t_end, n, pings = time.time() + args.seconds, 0, 0
    while n < args.count and time.time() < t_end:
        s = conn(args, linger0=n % 2 == 0)
        if args.every and n % args.every == 0:
            s.sendall(b"PING\r\n")
            if s.recv(64) != b"+PONG\r\n":
                print("connection %d: no PONG" % n)
                return 1
            pings += 1
        s.close()
        n += 1
    if report is not None:
        os.write(report, b"%d %d\n" % (n, pings))
    else:
        print("%d connections opened and closed (%d answered PING)" % (n, pings))
    return 0


def cmd_many(args):
    """Holds --count connections at once, each answers PING, then closes all."""
    socks = []
    for i in range(args.count):
        socks.append(conn(args))
    for s in socks:
        s.sendall(b"PING\r\n")
    bad = 0
    for s in socks:
        s.settimeout(10)
        if s.recv(64) != b"+PONG\r\n":
            bad += 1
    if args.hold_file:
        open(args.hold_file, "w").close()
        time.sleep(args.hold)
    for s in socks:
        s.close()
    print("%d connections held at once, %d without PONG" % (len(socks), bad))
    return 1 if bad else 0


def cmd_halfopen(args):
    """--count connections that each send a partial command and hold it;
    with --vanish, then disappear without a FIN or RST (TCP_REPAIR, root).
    Writes --ready when done, then sleeps --hold s (killed by the test)."""
    socks = []
    for i in range(args.count):
        s = conn(args)
        s.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\nhalf:%d\r\n$10\r\nabc" % (len("half:%d" % i), i))
        socks.append(s)
    if args.vanish:
        try:
            for s in socks:
                s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
        except PermissionError as e:
            print("cannot make sockets vanish (TCP_REPAIR needs CAP_NET_ADMIN): %s" % e)
            return 77
        for s in socks:
            s.close()  # in repair mode: gone here, nothing sent
        socks = []
    print("%d half-open connections%s" % (args.count, " vanished" if args.vanish else " held"), flush=True)
    if args.ready:
        open(args.ready, "w").close()
    time.sleep(args.hold)
    return 0


def cmd_midclose(args):
    """A whole SET then half of another, closed with FIN or RST (--rst)."""
    for i in range(args.count):
        s = conn(args, linger0=args.rst)
        s.sendall(b"SET mid:%d done\r\n" % i)
        s.settimeout(10)
        if s.recv(64) != b"+OK\r\n":
            print("no +OK for the whole SET %d" % i)
            return 1
        s.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\nmid:%d\r\n$4\r\nha" % (len("mid:%d" % i), i))
        s.close()
    print("%d requests cut mid-way (%s)" % (args.count, "RST" if args.rst else "FIN"))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bulk")
    b.add_argument("--key", default="k")
    b.add_argument("--size", type=int, default=1 << 30)
    b.add_argument("--max", type=int, default=1 << 30)
    b.add_argument("--seconds", type=float, default=20)
    c = sub.add_parser("churn")
    c.add_argument("--count", type=int, default=100000)
    c.add_argument("--seconds", type=float, default=45)
    c.add_argument("--every", type=int, default=100)
    c.add_argument("--workers", type=int, default=1)
    m = sub.add_parser("many")
    m.add_argument("--count", type=int, default=2000)
    m.add_argument("--hold", type=float, default=0)
    m.add_argument("--hold-file")
    h = sub.add_parser("halfopen")
    h.add_argument("--count", type=int, default=100)
    h.add_argument("--vanish", action="store_true")
    h.add_argument("--ready")
    h.add_argument("--hold", type=float, default=60)
    mc = sub.add_parser("midclose")
    mc.add_argument("--count", type=int, default=50)
    mc.add_argument("--rst", action="store_true")
    args = p.parse_args()
    try:
        return {"bulk": cmd_bulk, "churn": cmd_churn, "many": cmd_many,
                "halfopen": cmd_halfopen, "midclose": cmd_midclose}[args.cmd](args)
    except OSError as e:
        print("hostile_client: %s" % e)
        return 3


if __name__ == "__main__":
    sys.exit(main())
