"""clamd's client protocol, as apps/clamav's scripts speak it.

clamd reads NUL-terminated commands prefixed with "z" ("zPING\\0") and
answers each with one NUL-terminated reply.  Outside a session it closes
the connection after the reply.  INSTREAM's data follows the command as
chunks, each a 4-byte big-endian length and its bytes, ended by a chunk of
length 0.  In a session (IDSESSION ... END) every reply starts with
"<n>: ", n counting the session's commands from 1.

The signatures apps/clamav/signatures ships (one marker string each) and
the payloads that carry them are here too, so the workload, the verify
sweep and the tests agree on what a replica must detect.
"""

import socket
import struct

# name -> the bytes that name's signature matches (signatures/*.ndb).
MARKERS = {
    "Apus.Test.Alpha": b"apus-test-alpha-7f3a",
    "Apus.Test.Beta": b"apus-test-beta-19c2",
    "Apus.Test.Gamma": b"apus-test-gamma-e5d0",
}
# signatures/update/apus-update.ndb: not in a node's database until it is added
# there and clamd is told to RELOAD.
UPDATE_MARKER = ("Apus.Test.Update", b"apus-test-update-42b8")

CHUNK = 8192  # bytes per INSTREAM chunk
# byte -> a lowercase letter, digit, space or newline: payloads are text,
# which no file-type detection of clamd's takes for an archive or a program.
_ALPHABET = b"abcdefghijklmnopqrstuvwxyz0123456789 \n"
PRINTABLE = bytes(_ALPHABET[i % len(_ALPHABET)] for i in range(256))


def connect(host, port, timeout=30.0):
    """A connection to clamd: host:port, or a unix socket when host is a path."""
    if host.startswith("/"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(host)
        return s
    return socket.create_connection((host, port), timeout=timeout)


def stream_bytes(data):
    """data as INSTREAM's chunks, the closing empty chunk included."""
    out = bytearray()
    for i in range(0, len(data), CHUNK):
        piece = data[i:i + CHUNK]
        out += struct.pack("!I", len(piece)) + piece
    out += struct.pack("!I", 0)
    return bytes(out)


def command_bytes(cmd, data=None):
    """The bytes of one command (b"PING", b"INSTREAM" with data, ...)."""
    out = b"z" + cmd + b"\0"
    if data is not None:
        out += stream_bytes(data)
    return out


def read_reply(sock, buf=b""):
    """(one NUL-terminated reply without its NUL, the bytes after it);
    raises EOFError when the connection ends first."""
    while b"\0" not in buf:
        more = sock.recv(65536)
        if not more:
            raise EOFError("clamd closed the connection (%d bytes of a reply)" % len(buf))
        buf += more
    reply, _, rest = buf.partition(b"\0")
    return reply.decode("utf-8", "replace"), rest


def ask(host, port, cmd, data=None, timeout=30.0):
    """Send one command on a connection of its own; its reply."""
    with connect(host, port, timeout) as s:
        s.sendall(command_bytes(cmd, data))
        reply, _ = read_reply(s)
        return reply


def expected_reply(found):
    """What clamd answers a stream carrying the signature `found` (None: clean)."""
    if found is None:
        return "stream: OK"
    return "stream: %s.UNOFFICIAL FOUND" % found


def payload(rng, size, marker=None):
    """size random-looking printable bytes, with marker (bytes) in the middle."""
    body = rng.randbytes(size).translate(PRINTABLE)
    if marker is None:
        return body
    mid = size // 2
    return body[:mid] + marker + body[mid:]
