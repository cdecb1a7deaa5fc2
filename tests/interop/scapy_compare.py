"""Compare tunlab's decoded layers with scapy's dissection, field by field.

tunlab names its fields as scapy does; where the two split a header
differently (TCP's reserved bits and NS flag, GRE's reserved bits) the
comparison says how they map.
"""

from scapy.all import ARP, ICMP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPv6, Raw, load_contrib
from scapy.layers.inet6 import ICMPv6PacketTooBig, ICMPv6EchoRequest, ICMPv6EchoReply
from scapy.layers.l2 import GRE
from scapy.layers.vxlan import VXLAN

load_contrib("geneve")
from scapy.contrib.geneve import GENEVE  # noqa: E402

# tunlab layer name -> scapy class
LAYERS = {
    "Ethernet": Ether,
    "802.1Q": Dot1Q,
    "802.1AD": Dot1AD,
    "IP": IP,
    "IPv6": IPv6,
    "UDP": UDP,
    "TCP": TCP,
    "GRE": GRE,
    "GENEVE": GENEVE,
    "VXLAN": VXLAN,
    "ICMP": ICMP,
    "ARP": ARP,
}
# Layers scapy has no class for, or that are views of another layer.
SKIP = {"Raw", "Padding", "NVGRE", "STT", "STT segment"}
# Fields whose scapy split differs; compared specially below.
SPECIAL = {("TCP", "reserved"), ("TCP", "flags"), ("GRE", "reserved0"), ("GRE", "reserved1"), ("VXLAN", "reserved1")}


def norm(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, str):
        return v.lower()
    try:
        return int(v)
    except (TypeError, ValueError):
        return str(v).lower()


def scapy_layers(pkt):
    """scapy's layers in order, ICMP error quotes cut off (tunlab shows them raw)."""
    out = []
    layer = pkt
    while layer is not None and not isinstance(layer, (Raw,)) and layer.name != "NoPayload":
        out.append(layer)
        if isinstance(layer, (ICMP, ICMPv6PacketTooBig)):
            break
        layer = layer.payload if layer.payload else None
    return out


def compare_frame(ours: dict, pkt) -> list:
    """Return a list of mismatches (empty when tunlab and scapy agree)."""
    problems = []
    theirs = [l for l in scapy_layers(pkt)]
    mine = []
    for l in ours["layers"]:
        if l["name"].startswith("STT"):
            break  # scapy has no STT layer: what follows is Raw to it (tshark checks STT)
        if l["name"] not in SKIP:
            mine.append(l)
    # ICMPv6 layers: scapy uses one class per message type.
    i = 0
    for layer in mine:
        name = layer["name"]
        if i >= len(theirs):
            problems.append(f"frame {ours['number']}: tunlab has {name}, scapy has no more layers")
            break
        sl = theirs[i]
        i += 1
        if name == "ICMPv6":
            if not isinstance(sl, (ICMPv6PacketTooBig, ICMPv6EchoRequest, ICMPv6EchoReply)):
                problems.append(f"frame {ours['number']}: tunlab ICMPv6, scapy {sl.name}")
            fields = {f["name"]: f["value"] for f in layer["fields"]}
            fields["cksum"] = fields.pop("chksum")
            for k, v in fields.items():
                if k in sl.fields or any(fd.name == k for fd in sl.fields_desc):
                    if norm(getattr(sl, k)) != norm(v):
                        problems.append(f"frame {ours['number']} ICMPv6.{k}: tunlab {v}, scapy {getattr(sl, k)}")
            continue
        cls = LAYERS[name]
        if not isinstance(sl, cls):
            problems.append(f"frame {ours['number']}: layer {len(mine)} tunlab {name}, scapy {sl.name}")
            continue
        names = {fd.name for fd in sl.fields_desc}
        for f in layer["fields"]:
            k, v = f["name"], f["value"]
            if (name, k) in SPECIAL:
                continue
            if k not in names:
                continue
            sv = getattr(sl, k)
            if norm(sv) != norm(v):
                problems.append(f"frame {ours['number']} {name}.{k}: tunlab {v!r}, scapy {sv!r}")
        fields = {f["name"]: f["value"] for f in layer["fields"]}
        if name == "TCP":
            # scapy: 3 reserved bits, then a 9-bit flags field with NS on top.
            if fields["flags"] != int(sl.flags) & 0xFF:
                problems.append(f"frame {ours['number']} TCP.flags: tunlab {fields['flags']}, scapy {int(sl.flags)}")
            if fields["reserved"] != (sl.reserved << 1) | (int(sl.flags) >> 8):
                problems.append(f"frame {ours['number']} TCP.reserved differs")
        if name == "VXLAN":
            # scapy splits the 24 bits after the flags for VXLAN-GPE/GBP.
            raw = bytes(sl)[1:4]
            if fields["reserved1"] != int.from_bytes(raw, "big"):
                problems.append(f"frame {ours['number']} VXLAN.reserved1 differs")
        if name == "GENEVE":
            opts = layer.get("children", [])
            if len(opts) != len(sl.options):
                problems.append(f"frame {ours['number']}: {len(opts)} Geneve options, scapy {len(sl.options)}")
            for o, so in zip(opts, sl.options):
                for f in o["fields"]:
                    if any(fd.name == f["name"] for fd in so.fields_desc):
                        if norm(getattr(so, f["name"])) != norm(f["value"]):
                            problems.append(
                                f"frame {ours['number']} option {f['name']}: tunlab {f['value']}, scapy {getattr(so, f['name'])}"
                            )
    return problems
