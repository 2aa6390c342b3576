#!/usr/bin/env python3
"""A line server for tests that draws random numbers the ways C servers do
besides getrandom(): /dev/urandom read with open() and read() (slapd's
lutil_entropy) or readv(), lrand48() seeded with its pid and the time at
start, jrand48() and rand_r() on state of its own seeded the same way
(libuuid's jrand48), and arc4random(); a thread per connection.

usage: urandom_server.py ADDRESS PORT

It answers each line "urandom" or "urandomv" (16 bytes of the device, in
hex, read with read() or with readv() into two buffers),
"lrand48", "jrand48", "rand_r" or "arc4random" (the number) with its draw, which it also
appends to draws.log in the working directory (the replica's state, for
the test to compare).  Other lines are answered "?"."""
import ctypes
import os
import socketserver
import sys
import time

libc = ctypes.CDLL(None)	# the process's symbols: libapus.so's first
libc.lrand48.restype = ctypes.c_long
libc.arc4random.restype = ctypes.c_uint32
libc.jrand48.restype = ctypes.c_long
libc.jrand48.argtypes = [ctypes.POINTER(ctypes.c_ushort)]
libc.rand_r.argtypes = [ctypes.POINTER(ctypes.c_uint)]
# State of the caller's own, seeded at start like libuuid's.
XSUBI = (ctypes.c_ushort * 3)()
RAND_R_SEED = ctypes.c_uint()


def urandom():
    fd = os.open("/dev/urandom", os.O_RDONLY)
    try:
        return os.read(fd, 16).hex()
    finally:
        os.close(fd)


def urandomv():
    fd = os.open("/dev/urandom", os.O_RDONLY)
    try:
        parts = [bytearray(8), bytearray(8)]
        os.readv(fd, parts)
        return b"".join(parts).hex()
    finally:
        os.close(fd)


DRAWS = {
    b"urandom": urandom,
    b"urandomv": urandomv,
    b"lrand48": lambda: str(libc.lrand48()),
    b"arc4random": lambda: str(libc.arc4random()),
    b"jrand48": lambda: str(libc.jrand48(XSUBI)),
    b"rand_r": lambda: str(libc.rand_r(ctypes.byref(RAND_R_SEED))),
}


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            draw = DRAWS.get(line.strip())
            if not draw:
                self.wfile.write(b"?\n")
                continue
            value = draw()
            with open("draws.log", "a") as log:
                log.write(value + "\n")
            self.wfile.write(value.encode() + b"\n")


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == "__main__":
    seed = os.getpid() ^ time.time_ns()
    libc.srand48(ctypes.c_long(seed))
    for i in range(3):
        XSUBI[i] = (seed >> (16 * i)) & 0xffff
    RAND_R_SEED.value = seed & 0xffffffff
    Server((sys.argv[1], int(sys.argv[2])), Handler).serve_forever()
