"""A STAMP Session-Sender built with scapy's STAMP codec (Debian's
python3-scapy, scapy.contrib.stamp): it sends test packets with TLVs to a
reflector, dissects each reflection with the same codec, and prints what
it read, one line a field, for the Rust test to hold against the RFC.

usage: stamp_scapy.py PORT
"""
import socket
import struct
import sys

from scapy.contrib.stamp import (
    STAMPSessionReflectorTestUnauthenticated as Reflected,
    STAMPSessionSenderTestUnauthenticated as Sent,
    STAMPTestTLV,
)
from scapy.layers.inet import UDP

# Debian's scapy 2.5 reads a TLV list's length from pkt.parent, which is
# not set while dissecting: its underlayer (the UDP header) is.
for cls in (Sent, Reflected):
    for f in cls.fields_desc:
        if f.name == "tlv_objects":
            f.length_from = lambda pkt: pkt.underlayer.len - 8 - 44

port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
# sent with DSCP 46 (EF) and ECT(1); the reflection's traffic class read back
s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, (46 << 2) | 1)
s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
for seq in (41, 42, 44):
    pkt = Sent(
        seq=seq,
        ssid=0x1234,
        tlv_objects=[
            STAMPTestTLV(flags=0x80, type=1, len=6, value=b"\x5a" * 6),
            # Class of Service: DSCP1 = 34 (AF41) asked for the reflection
            STAMPTestTLV(flags=0x80, type=4, len=4, value=bytes([34 << 2, 0, 0, 0])),
            STAMPTestTLV(flags=0x80, type=200, len=2, value=b"xy"),
        ],
    )
    raw = bytes(pkt)
    s.sendto(raw, ("127.0.0.1", port))
    data, anc, _, _ = s.recvmsg(9000, 64)
    tos = [c[2][0] for c in anc if c[0] == socket.IPPROTO_IP and c[1] == socket.IP_TOS]
    # (dissected as from STAMP's port, where scapy binds its reflector layer)
    r = UDP(struct.pack("!HHHH", 862, 40000, 8 + len(data), 0) + data)[Reflected]
    print(f"sizes {len(raw)} {len(data)}")
    print(f"seq {r.seq} sender {r.seq_sender} ssid {r.ssid:#x} ttl {r.ttl_sender}")
    print(f"t1 {int(r.ts_sender == pkt.ts)} t2<=t3 {int(float(r.ts_rx) <= float(r.ts))}")
    print(f"tos {tos[0] if tos else -1}")
    for t in r.tlv_objects:
        print(f"tlv {t.type} {int(t.flags):#x} {t.len} {bytes(t.value).hex()}")
