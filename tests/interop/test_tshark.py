"""tshark, a second independent decoder, reads what tunlab builds.

samples/every-encap.pcap (built by tunlab-wire) must decode in tshark with
no malformed frame and no warning or error (checksums verified), and the
field values tshark reports must be the ones tunlab decode reports.

Two tshark settings are needed for STT: its dissector is a heuristic on
the IP layer, so IP must try heuristics first; and TCP sequence analysis
must be off, since STT's sequence field is frame length and offset, not a
byte stream. Wireshark 4.0's own STT checksum check is not used: it passes
in_cksum()'s result (0 for a good packet) where the field value is
expected, so it calls every correct checksum bad; the STT checksum is
verified instead through tshark's TCP dissector (test_stt_tcp_checksum).
"""

import json
import subprocess

import pytest

from conftest import ROOT, decode_json, tunlab_bin

SAMPLE = ROOT / "samples" / "every-encap.pcap"
VECTORS = ROOT / "tests" / "interop" / "vectors.pcap"
PREFS = [
    "-o", "ip.check_checksum:TRUE",
    "-o", "udp.check_checksum:TRUE",
    "-o", "tcp.check_checksum:TRUE",
    "-o", "tcp.analyze_sequence_numbers:FALSE",
    "-o", "ip.try_heuristic_first:TRUE",
]

# (tunlab layer, tunlab field) -> tshark field
FIELDS = {
    ("Ethernet", "src"): "eth.src",
    ("802.1Q", "vlan"): "vlan.id",
    ("802.1Q", "prio"): "vlan.priority",
    ("802.1AD", "vlan"): "ieee8021ad.id",
    ("IP", "src"): "ip.src",
    ("IP", "dst"): "ip.dst",
    ("IP", "ttl"): "ip.ttl",
    ("IP", "id"): "ip.id",
    ("IP", "len"): "ip.len",
    ("IP", "chksum"): "ip.checksum",
    ("IPv6", "src"): "ipv6.src",
    ("IPv6", "fl"): "ipv6.flow",
    ("IPv6", "plen"): "ipv6.plen",
    ("UDP", "sport"): "udp.srcport",
    ("UDP", "dport"): "udp.dstport",
    ("UDP", "len"): "udp.length",
    ("UDP", "chksum"): "udp.checksum",
    ("GENEVE", "vni"): "geneve.vni",
    ("GENEVE", "oam"): "geneve.flags.oam",
    ("GENEVE", "critical"): "geneve.flags.critical",
    ("GENEVE", "proto"): "geneve.proto_type",
    ("VXLAN", "vni"): "vxlan.vni",
    ("GRE", "proto"): "gre.proto",
    ("GRE", "key"): "gre.key",
    ("GRE", "sequence_number"): "gre.sequence_number",
    ("GRE", "chksum"): "gre.checksum",
    ("STT", "context_id"): "stt.context_id",
    ("STT", "flags"): "stt.flags",
    ("STT", "mss"): "stt.mss",
    ("STT", "l4offset"): "stt.l4offset",
    ("ICMP", "nexthopmtu"): "icmp.mtu",
    ("ICMPv6", "mtu"): "icmpv6.mtu",
    ("ARP", "psrc"): "arp.src.proto_ipv4",
}
# Geneve option fields, from the layer's children.
# (tshark's geneve.option.length counts bytes including the option header,
# and appears twice per option, so the length is checked by scapy instead.)
OPTION_FIELDS = {"classid": "geneve.option.class", "type": "geneve.option.type"}


def tshark(*args):
    r = subprocess.run(["tshark", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def as_int(s):
    s = s.strip()
    if s in ("True", "False"):
        return int(s == "True")
    return int(s, 0) if s.lower().startswith("0x") else int(s)


def norm(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    return str(v).lower()


@pytest.mark.parametrize("pcap", [SAMPLE, VECTORS], ids=["tunlab-built", "scapy-built"])
def test_no_malformed_frames_or_warnings(pcap):
    out = tshark("-r", str(pcap), "-V", *PREFS)
    bad = [l.strip() for l in out.splitlines() if "Malformed" in l or "Expert Info (Warning" in l or "Expert Info (Error" in l]
    if pcap == VECTORS:
        # scapy's vectors set reserved bits and every TCP flag (RST too) on
        # purpose; tshark warns about exactly those.
        bad = [l for l in bad if "reserved" not in l.lower() and "Connection reset" not in l]
    assert bad == []


def test_field_values_agree():
    ours = decode_json(SAMPLE)
    names = sorted(set(FIELDS.values()) | set(OPTION_FIELDS.values()))
    args = ["-r", str(SAMPLE), *PREFS, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=|"]
    for n in names:
        args += ["-e", n]
    rows = tshark(*args).splitlines()
    assert len(rows) == len(ours)
    checked = 0
    for frame, row in zip(ours, rows):
        theirs = dict(zip(names, row.split("\t")))
        mine = {}
        for layer in frame["layers"]:
            if layer["name"] == "STT segment":
                # tshark shows a segmented STT frame only once reassembled
                # (on its last segment); compare the outer layers only.
                break
            for f in layer["fields"]:
                key = FIELDS.get((layer["name"], f["name"]))
                if key:
                    mine.setdefault(key, []).append(norm(f["value"]))
            for child in layer.get("children", []):
                for f in child["fields"]:
                    key = OPTION_FIELDS.get(f["name"])
                    if key:
                        mine.setdefault(key, []).append(norm(f["value"]))
        segmented = any(l["name"] == "STT segment" for l in frame["layers"])
        # tshark also decodes the packet an ICMP error quotes; tunlab shows
        # the quote as raw bytes, so compare the outer occurrences only.
        quoting = any(l["name"] in ("ICMP", "ICMPv6") and any(f["name"] in ("nexthopmtu", "mtu") for f in l["fields"])
                      for l in frame["layers"])
        for key, values in mine.items():
            got = [v for v in theirs[key].split("|") if v != ""]
            if segmented or quoting:
                got = got[: len(values)]
            got = [as_int(v) if isinstance(values[0], int) else v.lower() for v in got]
            assert got == values, f"frame {frame['number']} {key}: tshark {got}, tunlab {values}"
            checked += 1
    assert checked > 100, checked


def test_stt_tcp_checksum():
    """STT segments carry a real TCP checksum; tshark's TCP dissector checks it."""
    out = tshark("-r", str(SAMPLE), "-o", "tcp.check_checksum:TRUE", "-Y", "tcp.dstport == 7471",
                 "-T", "fields", "-e", "tcp.checksum.status")
    statuses = out.split()
    assert statuses == ["1", "1", "1"], statuses  # 1 = good


def test_tunnels_on_other_ports_decode_as_tshark_does(tmp_path):
    """VXLAN on the Linux kernel's default port (8472, read without asking)
    and VXLAN and Geneve on ports named with --decode-as (tshark's -d
    spelling): the same frames, VNIs and inner addresses as tshark's."""
    from scapy.all import Ether, IP, UDP, VXLAN, ICMP, wrpcap
    from scapy.contrib.geneve import GENEVE

    def tenant(n):
        return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src=f"10.0.{n}.1", dst=f"10.0.{n}.2") / ICMP()

    outer = Ether() / IP(src="172.16.0.1", dst="172.16.0.2")
    frames = [
        outer / UDP(sport=40000, dport=8472) / VXLAN(vni=77) / tenant(1),
        outer / UDP(sport=40001, dport=5000) / VXLAN(vni=78) / tenant(2),
        outer / UDP(sport=40002, dport=6000) / GENEVE(vni=79, proto=0x6558) / tenant(3),
        # A reply: the tunnel's port is the source port.
        outer / UDP(sport=5000, dport=40001) / VXLAN(vni=80) / tenant(4),
    ]
    pcap = tmp_path / "ports.pcap"
    wrpcap(str(pcap), frames)
    rules = ["udp.port==5000,vxlan", "udp.port==6000,geneve"]
    out = subprocess.run(
        [tunlab_bin(), "decode", "--json", *[a for r in rules for a in ("--decode-as", r)], str(pcap)],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    ours = json.loads(out.stdout)
    theirs = tshark(
        "-r", str(pcap), "-d", "udp.port==8472,vxlan", *[a for r in rules for a in ("-d", r)],
        "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=|",
        "-e", "vxlan.vni", "-e", "geneve.vni", "-e", "ip.src",
    ).splitlines()
    assert len(ours) == len(theirs) == len(frames)
    for frame, row in zip(ours, theirs):
        vxlan_vni, geneve_vni, srcs = row.split("\t")
        mine = {l["name"]: {f["name"]: f["value"] for f in l["fields"]} for l in frame["layers"]}
        tunnel = "VXLAN" if vxlan_vni else "GENEVE"
        assert mine[tunnel]["vni"] == as_int(vxlan_vni or geneve_vni), (frame["number"], row)
        ip_srcs = [f["value"] for l in frame["layers"] if l["name"] == "IP" for f in l["fields"] if f["name"] == "src"]
        assert ip_srcs == srcs.split("|"), (frame["number"], row)


def test_odd_record_lengths_read_as_tshark_reads_them(tmp_path):
    """A file whose snap length is 0 and whose records claim more captured
    bytes than were on the wire: tshark reads every record (it trusts the
    captured length); tunlab decode reads the same frames, and says what
    was odd."""
    import struct
    from scapy.all import Ether, IP, UDP, raw

    frames = [raw(Ether() / IP(src=f"10.1.0.{i}", dst="10.1.0.9") / UDP(sport=1, dport=2) / (b"z" * 20)) for i in (1, 2, 3)]
    orig_lens = [10, len(frames[1]), 1500]  # over, equal to, under the captured length
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 0, 1)
    for f, orig in zip(frames, orig_lens):
        data += struct.pack("<IIII", 0, 0, len(f), orig) + f
    pcap = tmp_path / "odd.pcap"
    pcap.write_bytes(data)
    out = subprocess.run([tunlab_bin(), "decode", "--json", str(pcap)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    ours = json.loads(out.stdout)
    theirs = tshark("-r", str(pcap), "-T", "fields", "-e", "ip.src").splitlines()
    assert [ip for fr in ours for l in fr["layers"] if l["name"] == "IP" for f in l["fields"] if f["name"] == "src" for ip in [f["value"]]] == theirs
    assert "it says was 10 bytes on the wire" in " ".join(ours[0]["capture_notes"])
    assert "snap length of 0" in " ".join(ours[1]["capture_notes"])


def test_link_types_besides_ethernet_read_as_tshark_reads_them(tmp_path):
    """Linux cooked v1 and v2, raw IP, BSD null/loopback and Ethernet with
    its FCS kept: tunlab decode reads the same frames as tshark, the same
    addresses inner and outer, the same VXLAN VNI."""
    import struct
    import zlib
    from scapy.all import Ether, IP, UDP, VXLAN, ICMP, raw, wrpcap
    from scapy.layers.l2 import CookedLinux, CookedLinuxV2, Loopback

    def tunnelled(n):
        inner = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src=f"10.3.{n}.1", dst="10.3.0.9") / ICMP()
        return IP(src=f"172.20.0.{n}", dst="172.20.0.9") / UDP(sport=40000 + n, dport=4789) / VXLAN(vni=100 + n) / inner

    files = {
        "sll": [CookedLinux(pkttype=0, lladdrtype=1, lladdrlen=6, src=b"\x02\x00\x00\x00\x00\x07\x00\x00", proto=0x0800) / tunnelled(1)],
        "sll2": [CookedLinuxV2(proto=0x0800, ifindex=3, lladdrtype=1, pkttype=4, lladdrlen=6, src=b"\x02\x00\x00\x00\x00\x08\x00\x00") / tunnelled(2)],
        "raw": [tunnelled(3)],
        "null": [Loopback(type=2) / tunnelled(4)],
    }
    paths = {}
    for name, pkts in files.items():
        paths[name] = tmp_path / f"{name}.pcap"
        wrpcap(str(paths[name]), pkts, linktype={"raw": 101}.get(name))
    # Ethernet with a 4-byte FCS, said by pcap's FCS bits (libpcap's
    # LT_FCS_DATALINK_EXT: 2 words, present).
    frame = raw(Ether() / tunnelled(5))
    fcs = struct.pack("<I", zlib.crc32(frame) & 0xFFFFFFFF)
    # And 0x30000001: FCS-length bits set without libpcap's "present" bit;
    # the FCS is found by its CRC, as tshark finds it.
    for name, linktype in (("fcs", 0x24000001), ("fcs-unsaid", 0x30000001)):
        paths[name] = tmp_path / f"{name}.pcap"
        paths[name].write_bytes(
            struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
            + struct.pack("<IIII", 0, 0, len(frame) + 4, len(frame) + 4) + frame + fcs
        )
    for name, path in paths.items():
        out = subprocess.run([tunlab_bin(), "decode", "--json", str(path)], capture_output=True, text=True)
        assert out.returncode == 0, (name, out.stdout[-2000:], out.stderr)
        ours = json.loads(out.stdout)
        theirs = tshark("-r", str(path), "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|",
                        "-e", "ip.src", "-e", "vxlan.vni").splitlines()
        assert len(ours) == len(theirs), name
        for frame, row in zip(ours, theirs):
            srcs, vni = row.split("\t")
            mine = [f["value"] for l in frame["layers"] if l["name"] == "IP" for f in l["fields"] if f["name"] == "src"]
            assert mine == srcs.split("|"), (name, row)
            vnis = [f["value"] for l in frame["layers"] if l["name"] == "VXLAN" for f in l["fields"] if f["name"] == "vni"]
            assert vnis == [int(vni)], (name, row)
        if name.startswith("fcs"):
            last = ours[0]["layers"][-1]
            fcs_field = next(f for f in last["fields"] if f["name"] == "fcs")
            assert last["name"] == "FCS" and fcs_field.get("note") == "correct" and not last.get("warnings"), last


def test_super_frames_and_odd_arp_read_as_tshark_reads_them(tmp_path):
    """An IPv4 super-frame (total length 0, as BIG TCP writes it), an IPv6
    jumbogram (RFC 2675) and an ARP with an 8-byte hardware address in an
    802.1ad frame: the same TCP lengths and ARP addresses as tshark's."""
    from scapy.all import ARP, Dot1AD, Dot1Q, Ether, IP, IPv6, IPv6ExtHdrHopByHop, Jumbo, TCP, raw, wrpcap

    payload = b"p" * 70000
    v4 = Ether(raw(Ether() / IP(src="10.4.0.1", dst="10.4.0.2", len=0) / TCP(sport=5001, dport=80) / payload[:3000]))
    v6 = (Ether() / IPv6(src="fd00::1", dst="fd00::2", plen=0)
          / IPv6ExtHdrHopByHop(options=[Jumbo(jumboplen=8 + 20 + len(payload))]) / TCP(sport=5002, dport=80) / payload)
    odd_arp = (Ether(dst="ff:ff:ff:ff:ff:ff") / Dot1AD(vlan=10) / Dot1Q(vlan=20)
               / ARP(hwtype=1, hwlen=8, hwsrc=b"\x02\x00\x00\x00\x00\x00\x00\x01", psrc="10.5.0.1",
                     hwdst=b"\x00" * 8, pdst="10.5.0.2"))
    pcap = tmp_path / "super.pcap"
    wrpcap(str(pcap), [v4, v6, odd_arp])
    out = subprocess.run([tunlab_bin(), "decode", "--json", str(pcap)], capture_output=True, text=True)
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr)
    ours = json.loads(out.stdout)
    theirs = tshark("-r", str(pcap), "-T", "fields", "-e", "tcp.len", "-e", "arp.src.proto_ipv4",
                    "-e", "arp.dst.proto_ipv4").splitlines()
    assert len(ours) == len(theirs) == 3

    def field(frame, layer, name):
        return next(f["value"] for l in frame["layers"] if l["name"] == layer for f in l["fields"] if f["name"] == name)

    for frame, row in zip(ours[:2], theirs[:2]):
        tcp_len = int(row.split("\t")[0])
        tcp = next(l for l in frame["layers"] if l["name"] == "TCP")
        raw_load = next(l for l in frame["layers"] if l["name"] == "Raw")
        assert raw_load["offset"] - tcp["offset"] == 20
        assert len(field(frame, "Raw", "load")) // 2 == tcp_len, row
    assert field(ours[1], "IPv6 Hop-by-Hop", "jumbo") == 70028
    _, psrc, pdst = theirs[2].split("\t")
    assert (field(ours[2], "ARP", "psrc"), field(ours[2], "ARP", "pdst")) == (psrc, pdst)
    assert field(ours[2], "ARP", "hwlen") == 8


def test_udp_in_a_jumbogram_reads_its_length_from_ip(tmp_path):
    """UDP in an IPv6 jumbogram has length 0 (RFC 2675, section 4): its
    length is the jumbo payload's. tshark reads the whole payload; so does
    tunlab decode, and it checks the checksum over it."""
    from scapy.all import Ether, IPv6, IPv6ExtHdrHopByHop, Jumbo, UDP, raw, wrpcap

    payload = b"j" * 70000
    frame = raw(Ether() / IPv6(src="fd00::1", dst="fd00::2", plen=0)
                / IPv6ExtHdrHopByHop(options=[Jumbo(jumboplen=8 + 8 + len(payload))])
                / UDP(sport=40007, dport=9, len=0) / payload)
    pcap = tmp_path / "udp-jumbo.pcap"
    wrpcap(str(pcap), [Ether(frame)])
    out = subprocess.run([tunlab_bin(), "decode", "--json", str(pcap)], capture_output=True, text=True)
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr)
    (ours,) = json.loads(out.stdout)
    (theirs,) = tshark("-r", str(pcap), "-T", "fields", "-e", "udp.length", "-e", "data.len").splitlines()
    udp_len, data_len = (int(v) for v in theirs.split("\t"))
    udp = {f["name"]: f for l in ours["layers"] if l["name"] == "UDP" for f in l["fields"]}
    load = next(f["value"] for l in ours["layers"] if l["name"] == "Raw" for f in l["fields"] if f["name"] == "load")
    assert udp["len"]["value"] == udp_len == 0
    assert len(load) // 2 == data_len == len(payload)
    assert udp["chksum"].get("note") == "correct", udp["chksum"]
