#!/usr/bin/env python3
"""A mixed, seeded memcached workload (text protocol), for tests and benchmarks.

    workload.py [--host H] [--port P] [--conns N] [--ops N] [--keys K]
                [--seed S] [--duration SEC] [--prefix P] [--mix MIX]
                [--value-size N] [--delta D] [--latency]

--conns connections (default 50), each in its own thread with its own
random generator (seeded with --seed and the connection's number), send
--ops requests each (default 1000; 0: no limit), one at a time, until
--duration seconds (0: no limit) have passed.  Every request picks a key of
the key space <prefix>:0 .. <prefix>:K-1 (--keys, default 1000, --prefix,
default "key": the naming digest.py shares) and an operation of --mix
(default every one: set,get,incr,decr,append,prepend,delete,add).

A key whose number is a multiple of 4 is a counter: it is only ever set or
added with a number, and incr/decr go there, so that a well-behaved server
never answers CLIENT_ERROR; append and prepend go to the other keys.  Every
value carries the key's flags (the key's number % 65536), so a replica that
mixed up two keys' values or flags is seen by the digest.

Every reply is checked: an answer outside what the protocol allows for the
request (ERROR, CLIENT_ERROR, SERVER_ERROR, a malformed or missing reply, a
VALUE of another key or with other flags than the key's) counts as a failure
of its operation.  Prints one summary line per operation, then
"total: OPS ops, ERRS errors, R ops/s" (and with --latency the p50/p99/max of
the requests' round trips, in microseconds); exits 1 when any request
failed or a connection broke, 2 on bad arguments.
"""

import argparse
import random
import socket
import sys
import threading
import time
import urllib.parse

ALL_OPS = ("set", "get", "incr", "decr", "append", "prepend", "delete", "add")


def key_name(prefix, i):
    """The name of key I of a key space: shared with digest.py."""
    return "%s:%d" % (prefix, i)


def key_flags(i):
    """The flags every value of key I is stored with."""
    return i % 65536


def is_counter(i):
    return i % 4 == 0


class ProtocolError(Exception):
    pass


class Conn:
    """One memcached text-protocol connection, one request at a time."""

    def __init__(self, host, port, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed by the server")
        self.buf += data

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line.decode("latin-1")
            if len(self.buf) > 1 << 20:
                raise ProtocolError("reply line longer than 1 MB")
            self._fill()

    def block(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, end = self.buf[:n], self.buf[n:n + 2]
        if end != b"\r\n":
            raise ProtocolError("data block not ended by CRLF")
        self.buf = self.buf[n + 2:]
        return data

    def send(self, data):
        self.sock.sendall(data)

    def get_multi(self, keys, cas=False):
        """{key: (flags, value)} of the present keys of one get request;
        with CAS, {key: (flags, value, cas)} of one gets request."""
        self.send(("%s %s\r\n" % ("gets" if cas else "get", " ".join(keys))).encode("latin-1"))
        found = {}
        while True:
            line = self.line()
            if line == "END":
                return found
            parts = line.split(" ")
            if parts[0] != "VALUE" or len(parts) != (5 if cas else 4):
                raise ProtocolError("get %s: unexpected reply %r" % (keys[0], line))
            item = (int(parts[2]), self.block(int(parts[3])))
            found[parts[1]] = item + (int(parts[4]),) if cas else item


GET_BATCH = 100  # keys per get request of get_each


def get_each(c, keys, cas=False):
    """(key, item) for each present key of KEYS, in their order, read with
    get (gets with CAS) requests of GET_BATCH keys; item as get_multi's."""
    for b in range(0, len(keys), GET_BATCH):
        batch = keys[b:b + GET_BATCH]
        found = c.get_multi(batch, cas=cas)
        for k in batch:
            if k in found:
                yield k, found[k]


def metadump(c):
    """[(key, exptime)] of every item the server holds, from `lru_crawler
    metadump hash` (exptime: absolute Unix time, -1 for none).  The hash
    mode walks the hash table, where every item is once while nobody
    writes; `metadump all` walks the LRUs instead, and may miss items that
    the LRU maintainer moves from one to another meanwhile, items read
    shortly before (memcached's protocol.txt says so; here, memcached
    1.6.18 on a loaded machine, 28 of 200 such dumps of 12,000 items just
    read lacked 4 to 1,000 of them): a snapshot.py snapshot would lack
    acknowledged writes, and digest.py --all would not see them.  Its
    lines end in a bare LF, and the last one is END with CRLF, so they are
    taken from the connection's buffer here rather than with line().  Keys
    are str of latin-1 (one char per byte), as Conn reads them."""
    c.send(b"lru_crawler metadump hash\r\n")
    items = []
    while True:
        i = c.buf.find(b"\n")
        if i < 0:
            c._fill()
            continue
        item, c.buf = c.buf[:i].rstrip(b"\r").decode("latin-1"), c.buf[i + 1:]
        if item == "END":
            return items
        if item.startswith(("ERROR", "CLIENT_ERROR", "SERVER_ERROR", "BUSY")):
            raise ProtocolError("lru_crawler metadump: %s" % item)
        fields = dict(f.split("=", 1) for f in item.split(" ") if "=" in f)
        if "key" in fields:
            items.append((urllib.parse.unquote(fields["key"], encoding="latin-1"),
                          int(fields.get("exp", "-1"))))


def check_error(op, line):
    """Raise ProtocolError for the replies that are errors whatever the request."""
    if line == "ERROR" or line.startswith("CLIENT_ERROR") or line.startswith("SERVER_ERROR"):
        raise ProtocolError("%s: %s" % (op, line))


def do_op(c, op, i, prefix, rng, value_size, delta=0):
    """Send one request of OP on key I and check its reply; returns nothing,
    raises ProtocolError (bad reply) or OSError/ConnectionError (link)."""
    key = key_name(prefix, i)
    flags = key_flags(i)
    if op in ("set", "add", "append", "prepend"):
        if is_counter(i):
            if op in ("append", "prepend"):
                raise AssertionError("append/prepend on a counter")
            val = str(rng.randrange(1000000)).encode()
        elif op in ("append", "prepend"):
            val = b"%c" % rng.choice(b"abcdefghijklmnopqrstuvwxyz")
        else:
            val = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(value_size))
        c.send(b"%s %s %d 0 %d\r\n%s\r\n" % (op.encode(), key.encode(), flags, len(val), val))
        line = c.line()
        check_error(op, line)
        ok = ("STORED",) if op == "set" else ("STORED", "NOT_STORED")
        if line not in ok:
            raise ProtocolError("%s %s: unexpected reply %r" % (op, key, line))
    elif op == "get":
        found = c.get_multi([key])
        if key in found and found[key][0] != flags:
            raise ProtocolError("get %s: flags %d, want %d" % (key, found[key][0], flags))
        if set(found) - {key}:
            raise ProtocolError("get %s: answered for %s" % (key, sorted(found)))
    elif op in ("incr", "decr"):
        c.send(b"%s %s %d\r\n" % (op.encode(), key.encode(), delta or rng.randrange(1, 100)))
        line = c.line()
        check_error(op, line)
        if line != "NOT_FOUND" and not line.isdigit():
            raise ProtocolError("%s %s: unexpected reply %r" % (op, key, line))
    elif op == "delete":
        c.send(b"delete %s\r\n" % key.encode())
        line = c.line()
        check_error(op, line)
        if line not in ("DELETED", "NOT_FOUND"):
            raise ProtocolError("delete %s: unexpected reply %r" % (key, line))
    else:
        raise AssertionError(op)


def pick(rng, mix, keys):
    """An (operation, key number) the counter rule allows."""
    while True:
        op = rng.choice(mix)
        i = rng.randrange(keys)
        if is_counter(i) and op in ("append", "prepend"):
            continue
        if not is_counter(i) and op in ("incr", "decr") and any(
                o not in ("incr", "decr") for o in mix):
            # incr/decr of a string key would draw CLIENT_ERROR: go to a
            # counter instead (unless the mix has nothing else to do).
            i -= i % 4
        return op, i


class Stats:
    def __init__(self):
        self.done = {op: 0 for op in ALL_OPS}
        self.errors = {op: 0 for op in ALL_OPS}
        self.broken = 0
        self.samples = []
        self.first_errors = []
        self.lock = threading.Lock()


def worker(n, args, mix, stats, deadline):
    rng = random.Random("%s/%d" % (args.seed, n))
    done = {op: 0 for op in ALL_OPS}
    errors = {op: 0 for op in ALL_OPS}
    samples = [] if args.latency else None
    msgs = []
    c = None
    try:
        c = Conn(args.host, args.port)
        k = 0
        while (args.ops == 0 or k < args.ops) and (deadline is None or time.monotonic() < deadline):
            k += 1
            op, i = pick(rng, mix, args.keys)
            t0 = time.perf_counter()
            try:
                do_op(c, op, i, args.prefix, rng, args.value_size, args.delta)
            except ProtocolError as e:
                errors[op] += 1
                if len(msgs) < 5:
                    msgs.append(str(e))
                # The stream may be out of step after a bad reply: start over.
                c.close()
                c = Conn(args.host, args.port)
                continue
            if samples is not None:
                samples.append(time.perf_counter() - t0)
            done[op] += 1
    except (OSError, ConnectionError) as e:
        msgs.append("connection %d: %s" % (n, e))
        with stats.lock:
            stats.broken += 1
    finally:
        if c is not None:
            c.close()
        with stats.lock:
            for op in ALL_OPS:
                stats.done[op] += done[op]
                stats.errors[op] += errors[op]
            if samples:
                stats.samples.extend(samples)
            stats.first_errors.extend(msgs)


def percentile(sorted_vals, p):
    if not sorted_vals:
        return 0.0
    k = min(len(sorted_vals) - 1, max(0, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7301)
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--ops", type=int, default=1000, help="requests per connection (0: no limit)")
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--seed", default="1")
    ap.add_argument("--duration", type=float, default=0, help="seconds (0: no limit)")
    ap.add_argument("--prefix", default="key")
    ap.add_argument("--mix", default=",".join(ALL_OPS),
                    help="comma-separated operations, a name twice weighs twice")
    ap.add_argument("--value-size", type=int, default=32)
    ap.add_argument("--delta", type=int, default=0,
                    help="what incr/decr add or take (default: random, 1..99)")
    ap.add_argument("--latency", action="store_true", help="record and print p50/p99")
    args = ap.parse_args()
    mix = [m for m in args.mix.split(",") if m]
    bad = [m for m in mix if m not in ALL_OPS]
    if (bad or not mix or args.conns < 1 or args.keys < 1 or args.ops < 0 or args.value_size < 1
            or args.delta < 0):
        ap.error("bad --mix/--conns/--keys/--ops/--value-size (%s)" % ",".join(bad))
    if args.ops == 0 and args.duration <= 0:
        ap.error("--ops 0 needs a --duration")

    stats = Stats()
    t0 = time.monotonic()
    deadline = t0 + args.duration if args.duration > 0 else None
    threads = [threading.Thread(target=worker, args=(n, args, mix, stats, deadline))
               for n in range(args.conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0

    total = sum(stats.done.values())
    errs = sum(stats.errors.values())
    for op in ALL_OPS:
        if stats.done[op] or stats.errors[op]:
            print("%-8s %8d ok %6d errors" % (op, stats.done[op], stats.errors[op]))
    for m in stats.first_errors[:10]:
        print("error: %s" % m, file=sys.stderr)
    line = "total: %d ops, %d errors, %d broken connections, %.0f ops/s in %.2f s" % (
        total, errs, stats.broken, total / elapsed if elapsed > 0 else 0, elapsed)
    if args.latency:
        s = sorted(stats.samples)
        line += ", latency us p50 %.0f p99 %.0f max %.0f" % (
            percentile(s, 50) * 1e6, percentile(s, 99) * 1e6, (s[-1] if s else 0) * 1e6)
    print(line)
    sys.exit(1 if errs or stats.broken else 0)


if __name__ == "__main__":
    main()
