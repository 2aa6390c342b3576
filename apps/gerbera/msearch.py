#!/usr/bin/env python3
# An SSDP M-SEARCH for MediaServer:1 from ADDRESS (default 192.0.2.2):
# prints each distinct answer (count, LOCATION, USN) received in 2.5 s.
#
#   msearch.py [ADDRESS]
import socket, sys, time
ADDR = sys.argv[1] if len(sys.argv) > 1 else '192.0.2.2'
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(ADDR))
s.bind((ADDR, 0)); s.settimeout(0.3)
msg = ('M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\nMAN: "ssdp:discover"\r\nMX: 1\r\n'
       'ST: urn:schemas-upnp-org:device:MediaServer:1\r\n\r\n').encode()
s.sendto(msg, ('239.255.255.250', 1900))
end = time.time() + 2.5; seen = []
while time.time() < end:
    try: d, a = s.recvfrom(4096)
    except socket.timeout: continue
    h = dict(l.split(':', 1) for l in d.decode(errors='replace').split('\r\n')[1:] if ':' in l)
    seen.append((h.get('LOCATION', '').strip(), h.get('USN', '').strip()))
for x in sorted(set(seen)): print(seen.count(x), *x)
