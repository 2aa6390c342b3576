#!/usr/bin/env python3
"""A single-threaded line server for tests that waits for its clients with
select() or poll() rather than epoll, as clamd (poll) and libupnp (select)
do, and, as they do, takes a read that finds nothing after the wait said
readable for an error on the connection and drops it.

usage: poller_server.py select|poll ADDRESS PORT

Each line "incr" adds one to a counter shared by all clients and is
answered with the new value; each answer is also appended to counter.log
in the working directory (the replica's state and the order its requests
ran in, for the test to compare).  Other lines are answered "?".  A
dropped connection is logged to stderr as "dropped fd N: <error>"."""
import select
import socket
import sys

counter = 0


def handle(conn, buf):
    """Runs the whole lines of BUF[0] on CONN; keeps the rest."""
    global counter
    while b"\n" in buf[0]:
        line, _, buf[0] = buf[0].partition(b"\n")
        if line.strip() == b"incr":
            counter += 1
            reply = b"%d\n" % counter
            with open("counter.log", "ab") as log:
                log.write(reply)
        else:
            reply = b"?\n"
        conn.sendall(reply)


def main():
    mode, address, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((address, port))
    lsock.listen(128)
    lsock.setblocking(False)
    conns = {}  # fd -> (socket, [pending bytes])
    poller = select.poll() if mode == "poll" else None
    if poller:
        poller.register(lsock.fileno(), select.POLLIN)
    while True:
        if poller:
            ready = [fd for fd, _ in poller.poll()]
        else:
            ready, _, _ = select.select([lsock.fileno()] + list(conns), [], [])
        for fd in ready:
            if fd == lsock.fileno():
                try:
                    conn, _ = lsock.accept()
                except BlockingIOError:
                    continue
                conn.setblocking(False)
                conns[conn.fileno()] = (conn, [b""])
                if poller:
                    poller.register(conn.fileno(), select.POLLIN)
                continue
            conn, buf = conns[fd]
            try:
                data = conn.recv(65536)
            except OSError as e:  # EAGAIN too: the wait said readable
                print("dropped fd %d: %s" % (fd, e), file=sys.stderr, flush=True)
                data = b""
            if data:
                buf[0] += data
                try:
                    handle(conn, buf)
                    continue
                except OSError:
                    pass
            if poller:
                poller.unregister(fd)
            del conns[fd]
            conn.close()


if __name__ == "__main__":
    main()
