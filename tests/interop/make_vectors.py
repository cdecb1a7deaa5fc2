"""Build golden vectors with scapy: every field set to a non-default value.

Writes vectors.pcap (scapy's bytes) and vectors.json (the values each
frame was built with, keyed "Layer.index.field" as tunlab names them).
Run it to regenerate; test_vectors_are_scapys_own checks the committed
files are exactly what this script makes.

The TRex article's packet is written in scapy 2.8's GENEVE syntax: the
article used TRex's patched layer (options_class=..., options_data=...);
current scapy takes a list of GeneveOptions with the same fields.
"""

import json
import pathlib
import struct
import sys

from scapy.all import ARP, ICMP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPv6, Raw, load_contrib, wrpcap
from scapy.layers.inet6 import ICMPv6PacketTooBig
from scapy.layers.l2 import GRE
from scapy.layers.vxlan import VXLAN

load_contrib("geneve")
from scapy.contrib.geneve import GENEVE, GeneveOptions  # noqa: E402

HERE = pathlib.Path(__file__).parent


def vectors():
    v = []

    def add(name, pkt, fields):
        v.append((name, pkt, fields))

    inner = Ether(src="fa:16:3e:7f:a1:49", dst="fa:16:3e:a0:1f:28", type=0x0800) / IP(src="192.168.2.1", dst="192.168.2.181") / UDP(dport=1000, sport=2000) / Raw(b"\x00" * 18)
    add(
        "the TRex article's packet",
        Ether(src="40:a6:b7:0b:e9:b1", dst="fa:16:3e:40:4d:7d")
        / Dot1Q(vlan=177, type="IPv4")
        / IP(proto=17, src="172.17.2.163", dst="172.17.2.60")
        / UDP(sport=57025, dport=6081)
        / GENEVE(optionlen=2, proto=0x6558, vni=6, options=[GeneveOptions(classid=0x0102, type=0x80, length=1, data=b"\x00\x03\x00\x02")])
        / inner,
        {
            "802.1Q.0.vlan": 177,
            "UDP.0.sport": 57025,
            "GENEVE.0.vni": 6,
            "GENEVE.0.optionlen": 2,
            "GENEVE.0.opt0:classid": 0x0102,
            "GENEVE.0.opt0:type": 0x80,
            "GENEVE.0.opt0:ingress": 3,
            "GENEVE.0.opt0:egress": 2,
            "IP.1.dst": "192.168.2.181",
            "UDP.1.dport": 1000,
        },
    )

    add(
        "geneve with every header bit set, two options, carrying IPv4",
        Ether(src="02:11:22:33:44:55", dst="02:66:77:88:99:aa")
        / IP(src="10.9.8.7", dst="10.6.5.4", tos=0xB8, id=0xBEEF, ttl=3, flags="DF")
        / UDP(sport=65535, dport=6081)
        / GENEVE(
            version=0,
            oam=1,
            critical=1,
            reserved=0x15,
            proto=0x0800,
            vni=0xFEDCBA,
            reserved2=0xAB,
            options=[
                GeneveOptions(classid=0x0102, type=0x80, length=1, data=b"\x7f\xff\xff\xff"),
                GeneveOptions(classid=0xFFFF, type=0x7F, reserved=5, length=2, data=b"\x01\x02\x03\x04\x05\x06\x07\x08"),
            ],
        )
        / IP(src="172.16.0.1", dst="172.16.0.2")
        / ICMP(type=8, id=0x4242, seq=7)
        / Raw(b"hello"),
        {
            "GENEVE.0.oam": True,
            "GENEVE.0.critical": True,
            "GENEVE.0.reserved": 0x15,
            "GENEVE.0.reserved2": 0xAB,
            "GENEVE.0.vni": 0xFEDCBA,
            "GENEVE.0.proto": 0x0800,
            "GENEVE.0.optionlen": 5,
            "GENEVE.0.opt0:ingress": 0x7FFF,
            "GENEVE.0.opt0:egress": 0xFFFF,
            "GENEVE.0.opt1:classid": 0xFFFF,
            "GENEVE.0.opt1:type": 0x7F,
            "GENEVE.0.opt1:reserved": 5,
            "GENEVE.0.opt1:length": 2,
            "GENEVE.0.opt1:data": "0102030405060708",
            "IP.0.tos": 0xB8,
            "IP.0.id": 0xBEEF,
            "IP.0.flags": 2,
            "IP.0.ttl": 3,
            "ICMP.0.id": 0x4242,
        },
    )

    add(
        "geneve over IPv6, inner IPv6 TCP with every flag",
        Ether()
        / IPv6(src="2001:db8::1", dst="2001:db8::2", tc=0xB8, fl=0xFFFFF, hlim=255)
        / UDP(sport=49152, dport=6081)
        / GENEVE(vni=1, proto=0x6558)
        / Ether(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b")
        / IPv6(src="fd00::1", dst="fd00::2")
        / TCP(sport=1, dport=65535, seq=0xFFFFFFFF, ack=0x80000001, flags=0x1FF, reserved=7, window=0, urgptr=0xFFFF),
        {
            "IPv6.0.tc": 0xB8,
            "IPv6.0.fl": 0xFFFFF,
            "IPv6.0.hlim": 255,
            "TCP.0.seq": 0xFFFFFFFF,
            "TCP.0.ack": 0x80000001,
            "TCP.0.flags": 0xFF,
            "TCP.0.reserved": 0x0F,
            "TCP.0.urgptr": 0xFFFF,
        },
    )

    add(
        "vxlan with the GBP flag and group policy ID in the reserved bits",
        Ether()
        / IP(src="10.0.0.1", dst="10.0.0.2")
        / UDP(sport=50000, dport=4789)
        / VXLAN(flags=0x88, gpid=0x1234, vni=0xFFFFFF, reserved2=0x5A)
        / Ether(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b")
        / ARP(op=2, hwsrc="02:00:00:00:00:0a", psrc="192.168.1.1", hwdst="02:00:00:00:00:0b", pdst="192.168.1.2"),
        {
            "VXLAN.0.flags": 0x88,
            "VXLAN.0.reserved1": 0x1234,
            "VXLAN.0.vni": 0xFFFFFF,
            "VXLAN.0.reserved2": 0x5A,
            "ARP.0.op": 2,
            "ARP.0.psrc": "192.168.1.1",
        },
    )

    add(
        "gre with checksum, key and sequence number over Ethernet",
        Ether()
        / IP(src="10.0.0.1", dst="10.0.0.2")
        / GRE(chksum_present=1, key_present=1, seqnum_present=1, proto=0x6558, key=0xFEDCBA98, sequence_number=0x12345678)
        / Ether(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b")
        / IP(src="192.168.1.1", dst="192.168.1.2")
        / UDP(sport=7, dport=9),
        {
            "GRE.0.chksum_present": True,
            "GRE.0.key_present": True,
            "GRE.0.seqnum_present": True,
            "GRE.0.key": 0xFEDCBA98,
            "GRE.0.sequence_number": 0x12345678,
            "GRE.0.proto": 0x6558,
        },
    )

    add(
        "nvgre: VSID 0xabcdef, FlowID 0x7e",
        Ether()
        / IP(src="10.0.0.1", dst="10.0.0.2")
        / GRE(key_present=1, proto=0x6558, key=(0xABCDEF << 8) | 0x7E)
        / Ether(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b")
        / IP(src="192.168.1.1", dst="192.168.1.2")
        / UDP(sport=7, dport=9),
        {"NVGRE.0.vsid": 0xABCDEF, "NVGRE.0.flowid": 0x7E, "GRE.0.key": 0xABCDEF7E},
    )

    add(
        "qinq: S-tag PCP 7 DEI 1 VLAN 4094 over C-tag PCP 3 VLAN 1",
        Ether(src="02:00:00:00:00:0a", dst="ff:ff:ff:ff:ff:ff")
        / Dot1AD(prio=7, dei=1, vlan=4094)
        / Dot1Q(prio=3, vlan=1)
        / IP(src="192.168.1.1", dst="192.168.1.255")
        / UDP(sport=68, dport=67),
        {
            "802.1AD.0.prio": 7,
            "802.1AD.0.dei": 1,
            "802.1AD.0.vlan": 4094,
            "802.1Q.0.prio": 3,
            "802.1Q.0.vlan": 1,
        },
    )

    quoted = IP(src="192.168.2.1", dst="192.168.2.181", flags="DF") / UDP(sport=2000, dport=1000) / Raw(b"\x00" * 64)
    add(
        "icmp fragmentation-needed, next-hop MTU 1400",
        Ether() / IP(src="192.168.2.254", dst="192.168.2.1") / ICMP(type=3, code=4, nexthopmtu=1400) / quoted,
        {"ICMP.0.type": 3, "ICMP.0.code": 4, "ICMP.0.nexthopmtu": 1400},
    )

    add(
        "icmpv6 packet-too-big, MTU 1280",
        Ether() / IPv6(src="fd00::fe", dst="fd00::1") / ICMPv6PacketTooBig(mtu=1280) / IPv6(src="fd00::1", dst="fd00::2") / UDP() / Raw(b"\x00" * 32),
        {"ICMPv6.0.type": 2, "ICMPv6.0.mtu": 1280},
    )

    # scapy has no STT layer: the STT frame header is packed by hand
    # (draft-davie-stt-08 § 3.1) and carried by scapy's TCP.
    inner = bytes(Ether(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b") / IP(src="192.168.1.1", dst="192.168.1.2") / UDP(sport=7, dport=9) / Raw(b"stt"))
    stt_hdr = struct.pack("!BBBBHHQH", 0, 0x0E, 17, 0, 1448, (5 << 13) | (1 << 12) | 100, 0x0102030405060708, 0)
    frame = stt_hdr + inner
    add(
        "stt: flags, L4 offset, MSS, VLAN and context ID set",
        Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=54321, dport=7471, flags="PA", seq=len(frame) << 16, ack=0xCAFE, window=65535) / Raw(frame),
        {
            "STT.0.flags": 0x0E,
            "STT.0.l4offset": 17,
            "STT.0.mss": 1448,
            "STT.0.pcp": 5,
            "STT.0.v": True,
            "STT.0.vlan": 100,
            "STT.0.context_id": 0x0102030405060708,
            "TCP.0.ack": 0xCAFE,
        },
    )
    return v


def write(pcap: pathlib.Path, expect: pathlib.Path) -> None:
    vs = vectors()
    pkts = []
    for i, (_, p, _) in enumerate(vs):
        p = p.__class__(bytes(p))  # build once: checksums and lengths filled
        p.time = 1_700_000_000 + i
        pkts.append(p)
    wrpcap(str(pcap), pkts)
    expect.write_text(json.dumps([{"name": n, "fields": f} for n, _, f in vs], indent=1) + "\n")


if __name__ == "__main__":
    write(HERE / "vectors.pcap", HERE / "vectors.json")
    print(f"wrote {HERE / 'vectors.pcap'}", file=sys.stderr)
