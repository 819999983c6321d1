"""A stateful STAMP Session-Reflector built with scapy's STAMP codec
(Debian's python3-scapy): each test packet dissected with the codec and
its reflection built with it, numbered by its own count. It serves
COUNT packets (or stops after 5 s of silence), then prints how many.

usage: stamp_scapy_reflector.py PORTFILE COUNT
"""
import socket
import struct
import sys
import time

from scapy.contrib.stamp import (
    STAMPSessionReflectorTestUnauthenticated as Reflected,
    STAMPSessionSenderTestUnauthenticated as Sent,
)
from scapy.layers.inet import UDP

# Debian's scapy 2.5 reads a TLV list's length from pkt.parent, which is
# not set while dissecting: its underlayer (the UDP header) is.
for cls in (Sent, Reflected):
    for f in cls.fields_desc:
        if f.name == "tlv_objects":
            f.length_from = lambda pkt: pkt.underlayer.len - 8 - 44

NTP_UNIX = 2208988800
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
s.settimeout(5)
with open(sys.argv[1], "w") as f:
    f.write(str(s.getsockname()[1]))
want = int(sys.argv[2])
served = 0
while served < want:
    try:
        data, peer = s.recvfrom(9000)
    except socket.timeout:
        break
    rx = time.time() + NTP_UNIX
    sent = UDP(struct.pack("!HHHH", 40000, 862, 8 + len(data), 0) + data)[Sent]
    reply = Reflected(
        seq=served,
        ts=time.time() + NTP_UNIX,
        ssid=sent.ssid,
        ts_rx=rx,
        seq_sender=sent.seq,
        ts_sender=sent.ts,
        err_estimate_sender=sent.err_estimate,
        ttl_sender=255,
    )
    out = bytes(reply)
    # as long as the test packet (padding zeros)
    out = out + bytes(max(0, len(data) - len(out)))
    s.sendto(out, peer)
    served += 1
print(f"served {served}")
