"""tunlab decode against scapy, an independent implementation.

Two directions:
* samples/every-encap.pcap is built by tunlab-wire's push code; scapy's
  reading of it must match tunlab's, field by field.
* vectors.pcap is built by scapy (make_vectors.py) with every field set to
  non-default values; tunlab must read back exactly what scapy wrote.
"""

import json
import pathlib

from scapy.all import rdpcap

from conftest import ROOT, decode_json
from scapy_compare import compare_frame

SAMPLE = ROOT / "samples" / "every-encap.pcap"
VECTORS = pathlib.Path(__file__).parent / "vectors.pcap"
EXPECT = pathlib.Path(__file__).parent / "vectors.json"


def test_sample_matches_scapy():
    ours = decode_json(SAMPLE)
    pkts = rdpcap(str(SAMPLE))
    assert len(ours) == len(pkts) == 12
    problems = []
    for o, p in zip(ours, pkts):
        assert o.get("error") is None, o
        problems += compare_frame(o, p)
    assert problems == []


def test_scapy_vectors_read_field_for_field():
    ours = decode_json(VECTORS)
    pkts = rdpcap(str(VECTORS))
    assert len(ours) == len(pkts)
    problems = []
    for o, p in zip(ours, pkts):
        assert o.get("error") is None, o
        problems += compare_frame(o, p)
    assert problems == []


def test_scapy_vectors_expected_values():
    """Values the generator set, by layer and field, as tunlab reports them."""
    ours = decode_json(VECTORS)
    expect = json.loads(EXPECT.read_text())
    assert len(expect) == len(ours)
    for want, got in zip(expect, ours):
        layers = {}
        for l in got["layers"]:
            layers.setdefault(l["name"], []).append(l)
        for key, value in want["fields"].items():
            lname, idx, fname = key.rsplit(".", 2)
            layer = layers[lname][int(idx)]
            if ":" in fname:
                n, field = fname[3:].split(":")
                fields = {f["name"]: f["value"] for f in layer["children"][int(n)]["fields"]}
                assert fields[field] == value, (want["name"], key)
            else:
                fields = {f["name"]: f["value"] for f in layer["fields"]}
                assert fields[fname] == value, (want["name"], key, fields[fname])


def test_vectors_are_scapys_own(tmp_path):
    """The committed vectors are exactly what scapy builds today."""
    import make_vectors

    out = tmp_path / "v.pcap"
    make_vectors.write(out, tmp_path / "v.json")
    assert out.read_bytes() == VECTORS.read_bytes()
    assert json.loads((tmp_path / "v.json").read_text()) == json.loads(EXPECT.read_text())


def test_damaged_capture_reports_and_fails(tmp_path):
    import subprocess
    from conftest import tunlab_bin

    data = SAMPLE.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) - 100])  # the last record is cut short
    r = subprocess.run([tunlab_bin(), "decode", str(cut)], capture_output=True, text=True)
    assert r.returncode == 1
    assert "Frame 11:" in r.stdout  # everything before the damage was printed
    assert "damaged after frame 11" in r.stderr


def test_malformed_frame_shows_what_it_can(tmp_path):
    """A Geneve option that runs past its packet: the layers before it are
    shown, the error names layer, field and offset, the exit status is 1."""
    import subprocess

    from scapy.all import IP, UDP, Ether, wrpcap
    from conftest import tunlab_bin

    good = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=6081)
                 / bytes.fromhex("02006558000006000102800100030002")
                 / Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x88B5))
    # Option length 1 word -> 3 words: its data now overruns the options area.
    bad = bytearray(good)
    bad[14 + 20 + 8 + 11] = 0x03
    pcap = tmp_path / "bad.pcap"
    wrpcap(str(pcap), [Ether(bytes(bad)), Ether(good)])
    r = subprocess.run([tunlab_bin(), "decode", str(pcap)], capture_output=True, text=True)
    assert r.returncode == 1
    assert "###[ UDP ]###" in r.stdout
    assert "geneve: option data: needs 12 bytes, only 4 available (at byte offset 54)" in r.stdout
    assert "Frame 2:" in r.stdout  # the next frame is still decoded
    assert "1 of 2 frames malformed (frames 1)" in r.stderr
