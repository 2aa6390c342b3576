#!/usr/bin/env python3
"""A hostile apus peer for tests/bats/hostile.bats: speaks the tcp
transport's admission protocol (coordinator/transport/transport_tcp.c) with a key it
is given, right or wrong, replays recorded handshakes, and once admitted
sends frames the receiver must refuse, or stalls in the middle of one.

Wire format (little-endian, as the C structs lie in memory):
  hello     {u32 magic "APUS", u16 version 2, u8 from, u8 to, nonce[16], u64 incarnation}
  challenge {nonce_a[16], HMAC(key, "apus-tcp-accept\\0" from to nonce_c nonce_a)}
  proof     {HMAC(key, "apus-tcp-connect\\0" from to nonce_a nonce_c)}
  welcome   {u32 magic, u32 pad, u64 incarnation}
  frame     {u64 off, u32 len, u32 pad} + len bytes, written at region + off

Every command prints one line saying what happened and exits 0 when the
peer behaved as the command says (it does not judge the node: the test
does), 2 on bad use, 3 when something unexpected stopped it.
"""
import argparse
import hashlib
import hmac
import os
import socket
import struct
import sys
import time

MAGIC = 0x41505553
VERSION = 2
HELLO = struct.Struct("<IHBB16sQ")
FRAME = struct.Struct("<QII")


def load_key(path):
    with open(path) as f:
        text = f.read().strip()
    if len(text) != 64:
        sys.exit("hostile_peer: %s: expected 64 hex digits" % path)
    return bytes.fromhex(text)


def mac(key, label, frm, to, a, b):
    msg = label.encode() + b"\0" + struct.pack("<II", frm, to) + a + b
    return hmac.new(key, msg, hashlib.sha256).digest()


def recv_exact(sock, n, timeout):
    """N bytes, or fewer if the other side closed (or reset) first."""
    sock.settimeout(timeout)
    buf = b""
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        buf += chunk
    return buf


def closed_by_peer(sock, timeout):
    """Whether the other side closes the connection within TIMEOUT s."""
    sock.settimeout(timeout)
    try:
        while True:
            if not sock.recv(4096):
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def connect(args):
    s = socket.create_connection((args.host, args.port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def handshake(args, key, record=None):
    """Runs the connector's side; returns the socket once welcomed, or
    None (the acceptor hung up).  RECORD (a list) gets the bytes each way."""
    s = connect(args)
    nonce_c = os.urandom(16)
    inc = struct.unpack("<Q", os.urandom(8))[0] | 1
    hello = HELLO.pack(MAGIC, VERSION, args.frm, args.to, nonce_c, inc)
    s.sendall(hello)
    ch = recv_exact(s, 48, 5)
    if record is not None:
        record += [hello, ch]
    if len(ch) < 48:
        print("refused before the challenge (got %d bytes)" % len(ch))
        return None
    nonce_a, their = ch[:16], ch[16:]
    if not hmac.compare_digest(their, mac(key, "apus-tcp-accept", args.frm, args.to, nonce_c, nonce_a)):
        # A peer with the wrong key cannot check the acceptor; it goes on.
        print("challenge MAC does not match our key")
    proof = mac(key, "apus-tcp-connect", args.frm, args.to, nonce_a, nonce_c)
    # --then-frame: a frame right behind the proof, before any welcome.
    then = getattr(args, "then_frame", None)
    s.sendall(proof + (FRAME.pack(then[0], then[1], 0) + b"\x5a" * then[1] if then else b""))
    w = recv_exact(s, 16, 5)
    if record is not None:
        record += [proof, w]
    if len(w) < 16 or struct.unpack("<I", w[:4])[0] != MAGIC:
        print("refused after the proof (got %d bytes of the welcome)" % len(w))
        return None
    return s


def cmd_handshake(args):
    """Admission with --key: 'admitted' (exit 0 with --expect admitted) or 'refused'."""
    record = []
    s = handshake(args, load_key(args.key), record)
    if args.record:
        with open(args.record, "wb") as f:
            f.write(record[0] + (record[2] if len(record) > 2 else b""))
    got = "admitted" if s else "refused"
    print(got)
    if s:
        s.close()
    return 0 if got == args.expect else 1


def cmd_replay(args):
    """Sends a recorded hello, then the recorded proof whatever the new
    challenge: must be refused."""
    data = open(args.record, "rb").read()
    if len(data) != HELLO.size + 32:
        print("record %s holds %d bytes, want %d" % (args.record, len(data), HELLO.size + 32))
        return 3
    s = connect(args)
    s.sendall(data[:HELLO.size])
    ch = recv_exact(s, 48, 5)
    if len(ch) < 48:
        print("refused before the challenge")
        return 0
    s.sendall(data[HELLO.size:])
    w = recv_exact(s, 16, 5)
    if len(w) == 16:
        print("ADMITTED with a replayed handshake")
        return 1
    print("refused")
    return 0


def cmd_frame(args):
    """Admitted with the right key, sends one frame (OFF, LEN); exit 0 when
    the node drops the connection within --wait s, 1 when it keeps it."""
    s = handshake(args, load_key(args.key))
    if not s:
        print("not admitted")
        return 3
    payload = bytes([args.fill]) * args.len if args.len <= (1 << 20) else b""
    s.sendall(FRAME.pack(args.off, args.len, 0))
    try:
        if payload:
            s.sendall(payload)
        else:
            # A length the node must refuse at the header: a little of
            # the payload, in case it did not.
            s.sendall(bytes([args.fill]) * 65536)
    except (BrokenPipeError, ConnectionResetError):
        print("dropped")
        return 0
    if closed_by_peer(s, args.wait):
        print("dropped")
        return 0
    print("kept the connection after the frame")
    return 1


def cmd_stall(args):
    """Admitted, sends a header and half the payload of a frame into the
    log's last bytes, then holds the connection --seconds s."""
    s = handshake(args, load_key(args.key))
    if not s:
        print("not admitted")
        return 3
    s.sendall(FRAME.pack(args.off, args.len, 0) + bytes([args.fill]) * (args.len // 2))
    print("stalling", flush=True)
    closed = closed_by_peer(s, args.seconds)
    print("the node closed the stalled connection" if closed else "held %d s" % args.seconds)
    return 0


def flow_payload(segments, isn):
    """Reassembles a TCP stream from {seq: payload} starting after ISN."""
    out, want = b"", (isn + 1) & 0xFFFFFFFF
    while want in segments:
        p = segments[want]
        out += p
        want = (want + len(p)) & 0xFFFFFFFF
    return out


def cmd_sniff(args):
    """Records, off the loopback interface, the first handshake a client
    sends to --port (hello and proof: 64 bytes) into --record.  Needs root
    (AF_PACKET); exit 77 without it."""
    try:
        sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
        sniffer.bind(("lo", 0))
    except (PermissionError, OSError) as e:
        print("cannot sniff loopback: %s" % e)
        return 77
    # Ready to capture: the test waits for this file before it makes a
    # node connect.
    if args.ready:
        open(args.ready, "w").close()
    flows = {}  # (sport) -> [isn, {seq: payload}]
    deadline = time.time() + args.timeout
    sniffer.settimeout(0.2)
    while time.time() < deadline:
        try:
            pkt, addr = sniffer.recvfrom(65535)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING:
            continue  # loopback shows each packet twice
        ip = pkt[14:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        tcp = ip[(ip[0] & 15) * 4:]
        total = struct.unpack("!H", ip[2:4])[0]
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        if dport != args.port:
            continue
        flags = tcp[13]
        payload = ip[(ip[0] & 15) * 4 + (tcp[12] >> 4) * 4:total]
        if flags & 0x02:  # SYN
            flows[sport] = [seq, {}]
            continue
        if sport not in flows or not payload:
            continue
        flows[sport][1][seq] = payload
        data = flow_payload(flows[sport][1], flows[sport][0])
        if len(data) >= HELLO.size + 32:
            magic, _, frm, to, _, _ = HELLO.unpack(data[:HELLO.size])
            if magic == MAGIC:
                with open(args.record, "wb") as f:
                    f.write(data[:HELLO.size + 32])
                print("recorded node %d's handshake to node %d (port %d)" % (frm, to, sport))
                return 0
            del flows[sport]
    print("no handshake to port %d within %d s" % (args.port, args.timeout))
    return 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True, help="the target node's peer_port")
    p.add_argument("--from", dest="frm", type=int, default=0, help="the node id we claim")
    p.add_argument("--to", type=int, default=0, help="the target's node id")
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("handshake")
    h.add_argument("--key", required=True)
    h.add_argument("--expect", choices=["admitted", "refused"], default="admitted")
    h.add_argument("--record", help="write our hello and proof here")
    h.add_argument("--then-frame", nargs=2, type=lambda v: int(v, 0), metavar=("OFF", "LEN"),
                   help="send a frame of 0x5a bytes right behind the proof")
    r = sub.add_parser("replay")
    r.add_argument("--record", required=True)
    f = sub.add_parser("frame")
    f.add_argument("--key", required=True)
    f.add_argument("--off", type=lambda v: int(v, 0), required=True)
    f.add_argument("--len", type=lambda v: int(v, 0), required=True)
    f.add_argument("--fill", type=lambda v: int(v, 0), default=0x5A)
    f.add_argument("--wait", type=float, default=3)
    st = sub.add_parser("stall")
    st.add_argument("--key", required=True)
    st.add_argument("--off", type=lambda v: int(v, 0), required=True)
    st.add_argument("--len", type=lambda v: int(v, 0), required=True)
    st.add_argument("--fill", type=lambda v: int(v, 0), default=0x5A)
    st.add_argument("--seconds", type=int, default=10)
    sn = sub.add_parser("sniff")
    sn.add_argument("--record", required=True)
    sn.add_argument("--ready", help="created once capturing")
    sn.add_argument("--timeout", type=int, default=20)
    args = p.parse_args()
    try:
        return {"handshake": cmd_handshake, "replay": cmd_replay, "frame": cmd_frame,
                "stall": cmd_stall, "sniff": cmd_sniff}[args.cmd](args)
    except OSError as e:
        print("hostile_peer: %s" % e)
        return 3


if __name__ == "__main__":
    sys.exit(main())
