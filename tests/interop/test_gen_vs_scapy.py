"""`tunlab gen` against scapy: the same description, the same bytes.

scapy builds each packet independently (its own field defaults, lengths and
checksums); tunlab gen writes the same description to a pcap; every byte
must agree. Includes the exact packet of the Geneve/TRex article, written
as the article writes it.
"""

import subprocess

import pytest
from scapy.all import IP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPv6, Raw, rdpcap
from scapy.contrib.geneve import GENEVE, GeneveOptions
from scapy.layers.l2 import GRE
from scapy.layers.vxlan import VXLAN

from conftest import tunlab_bin


def gen(tmp_path, description, *args):
    out = tmp_path / "gen.pcap"
    r = subprocess.run(
        [tunlab_bin(), "gen", description, "--pcap", str(out), *args],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    return [bytes(p) for p in rdpcap(str(out))]


# The article's packet as the article writes it (only the line breaks
# removed), and what scapy 2.8 builds for it: scapy's GENEVE takes the
# option as a GeneveOptions layer rather than the article's flat fields.
ARTICLE = (
    "Ether(src='40:a6:b7:0b:e9:b1',dst='fa:16:3e:40:4d:7d')/"
    "Dot1Q(vlan=177,type='IPv4')/"
    "IP(proto=17,src='172.17.2.163',dst='172.17.2.60')/"
    "UDP(sport=57025,dport=6081)/"
    'GENEVE(optionlen=2,proto=0x6558,vni=6,options_class=0x0102,options_type=0x80,options_len=1,options_data=b"\\x00\\x03\\x00\\x02")/'
    "Ether(src='fa:16:3e:7f:a1:49',dst='fa:16:3e:a0:1f:28',type=0x0800)/"
    "IP(src='192.168.2.1',dst='192.168.2.181')/"
    "UDP(dport=1000,sport=2000)/pad"
)


def article_scapy(frame_size):
    p = (
        Ether(src="40:a6:b7:0b:e9:b1", dst="fa:16:3e:40:4d:7d")
        / Dot1Q(vlan=177, type="IPv4")
        / IP(proto=17, src="172.17.2.163", dst="172.17.2.60")
        / UDP(sport=57025, dport=6081)
        / GENEVE(
            optionlen=2,
            proto=0x6558,
            vni=6,
            options=[GeneveOptions(classid=0x0102, type=0x80, length=1, data=b"\x00\x03\x00\x02")],
        )
        / Ether(src="fa:16:3e:7f:a1:49", dst="fa:16:3e:a0:1f:28", type=0x0800)
        / IP(src="192.168.2.1", dst="192.168.2.181")
        / UDP(dport=1000, sport=2000)
    )
    # The article's `pad`: zeros in the inner UDP payload up to the frame
    # size (FCS excluded).
    return bytes(p / Raw(b"\x00" * (frame_size - 4 - len(p))))


@pytest.mark.parametrize("size", [128, 256, 512, 1024, 1500])
def test_the_articles_packet_is_byte_identical(tmp_path, size):
    got = gen(tmp_path, ARTICLE, "--size", str(size))
    assert len(got) == 1
    assert got[0] == article_scapy(size)


def test_the_ovn_helper_spells_the_same_option(tmp_path):
    short = ARTICLE.replace(
        'optionlen=2,proto=0x6558,vni=6,options_class=0x0102,options_type=0x80,options_len=1,options_data=b"\\x00\\x03\\x00\\x02"',
        "vni=6,opt=ovn(ingress=3,egress=2)",
    )
    assert short != ARTICLE
    assert gen(tmp_path, short, "--size", "256") == [article_scapy(256)]


# Every other layer, with fields away from their defaults. One difference
# of defaults is deliberate: over an Ether payload scapy's VXLAN sets the
# VXLAN-GPE next-protocol bit and field (flags 0x0c, next protocol 3);
# tunlab writes RFC 7348's header (flags 0x08, reserved bits zero), so the
# scapy side says flags=0x08. Like scapy, UDP over VXLAN defaults both
# ports to 4789.
CASES = [
    (
        "Ether(src=02:00:00:00:00:01,dst=02:00:00:00:00:02)/Dot1AD(vlan=5,prio=3)/Dot1Q(vlan=100,dei=1)/"
        "IP(src=10.1.1.1,dst=10.1.1.2,tos=0x28,id=7,flags=DF,ttl=9)/TCP(sport=1234,dport=80,seq=5,ack=6,flags=PA,window=512)",
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / Dot1AD(vlan=5, prio=3)
        / Dot1Q(vlan=100, dei=1)
        / IP(src="10.1.1.1", dst="10.1.1.2", tos=0x28, id=7, flags="DF", ttl=9)
        / TCP(sport=1234, dport=80, seq=5, ack=6, flags="PA", window=512),
    ),
    (
        "Ether(src=02:00:00:00:00:01,dst=02:00:00:00:00:02)/IP(src=172.16.0.1,dst=172.16.0.2)/UDP(sport=49152)/"
        "VXLAN(vni=0xabcdef)/Ether(src=02:00:00:00:00:03,dst=02:00:00:00:00:04)/IPv6(src=fe80::1,dst=fe80::2,hlim=7,fl=5)/"
        "UDP(sport=9,dport=10)/Raw(load=b\"\\x01\\x02hello\")",
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / IP(src="172.16.0.1", dst="172.16.0.2")
        / UDP(sport=49152, dport=4789)
        / VXLAN(vni=0xABCDEF, flags=0x08)
        / Ether(src="02:00:00:00:00:03", dst="02:00:00:00:00:04")
        / IPv6(src="fe80::1", dst="fe80::2", hlim=7, fl=5)
        / UDP(sport=9, dport=10)
        / Raw(b"\x01\x02hello"),
    ),
    (
        "Ether(src=02:00:00:00:00:01,dst=02:00:00:00:00:02)/IP(src=172.16.0.1,dst=172.16.0.2)/"
        "GRE(key_present=1,key=0x1234567,seqnum_present=1,sequence_number=99)/"
        "Ether(src=02:00:00:00:00:03,dst=02:00:00:00:00:04)/IP(src=1.1.1.1,dst=2.2.2.2)/UDP()",
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / IP(src="172.16.0.1", dst="172.16.0.2")
        / GRE(key_present=1, key=0x1234567, seqnum_present=1, sequence_number=99)
        / Ether(src="02:00:00:00:00:03", dst="02:00:00:00:00:04")
        / IP(src="1.1.1.1", dst="2.2.2.2")
        / UDP(),
    ),
    (
        "Ether(src=02:00:00:00:00:01,dst=02:00:00:00:00:02)/IPv6(src=2001:db8::1,dst=2001:db8::2)/UDP(sport=5000)/"
        "GENEVE(vni=77,oam=1,critical=1,opt=[ovn(ingress=32767,egress=65535),tlv(class=0xffff,type=0x01,data=b\"abcdefgh\")])/"
        "IP(src=10.0.0.1,dst=10.0.0.2)/UDP(sport=1,dport=2)",
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / IPv6(src="2001:db8::1", dst="2001:db8::2")
        / UDP(sport=5000, dport=6081)
        / GENEVE(
            vni=77,
            oam=1,
            critical=1,
            proto=0x0800,
            options=[
                GeneveOptions(classid=0x0102, type=0x80, data=b"\x7f\xff\xff\xff"),
                GeneveOptions(classid=0xFFFF, type=0x01, data=b"abcdefgh"),
            ],
        )
        / IP(src="10.0.0.1", dst="10.0.0.2")
        / UDP(sport=1, dport=2),
    ),
]


@pytest.mark.parametrize("description,scapy_packet", CASES, ids=["qinq-tcp", "vxlan-ipv6", "gre-key-seq", "geneve-ipv6-options"])
def test_every_layer_is_byte_identical(tmp_path, description, scapy_packet):
    assert gen(tmp_path, description) == [bytes(scapy_packet)]


def test_ranges_make_exactly_the_flows_written(tmp_path):
    got = gen(
        tmp_path,
        "Ether()/IP(src=192.168.2.1-192.168.2.4,dst=10.0.0.1)/UDP(dport=[1000,2000,3000])/VXLAN(vni=1-2)/Ether()",
    )
    # 4 x 3 x 2 flows, one packet each (the default count), each of them
    # the packet scapy builds for that combination.
    assert len(got) == 24
    want = {
        bytes(
            Ether(src="00:00:00:00:00:00", dst="ff:ff:ff:ff:ff:ff")
            / IP(src=f"192.168.2.{s}", dst="10.0.0.1")
            / UDP(dport=d)
            / VXLAN(vni=v, flags=0x08)
            / Ether(src="00:00:00:00:00:00", dst="ff:ff:ff:ff:ff:ff", type=0x9000)
        )
        for s in range(1, 5)
        for d in (1000, 2000, 3000)
        for v in (1, 2)
    }
    assert set(got) == want


def test_bad_descriptions_point_at_the_token(tmp_path):
    r = subprocess.run(
        [tunlab_bin(), "gen", "Ether()/IP(src=10.0.0.300)/UDP()", "--show"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert "IP.src: '10.0.0.300' is not an IPv4 address" in r.stderr
    assert "Ether()/IP(src=10.0.0.300)/UDP()\n" in r.stderr
    assert "\n                 ^" in r.stderr
    r = subprocess.run(
        [tunlab_bin(), "gen", "Ether()/IP()/UDP()", "--size", "64", "--show", "--count", "1"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [tunlab_bin(), "gen", "Ether()/IP()/UDP()/VXLAN()/Ether()/IP()/UDP()", "--size", "64", "--show"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert "frame size 64 is smaller than the headers: at least 96 bytes" in r.stderr
