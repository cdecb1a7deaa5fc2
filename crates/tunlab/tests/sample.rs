//! `samples/every-encap.pcap`, the capture `tunlab decode` is shown on, is
//! built here with tunlab-wire's own build/push code. This test rebuilds it
//! and fails if the committed file differs; `TUNLAB_BLESS=1` rewrites it.
//! scapy and tshark then read it in `tests/interop/` (independent checks).

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;
use tunlab_wire::ethernet::{self, EtherType, MacAddr};
use tunlab_wire::geneve::{OptType, OptionRepr, OvnPorts, OVN_CLASS, OVN_TYPE};
use tunlab_wire::ipv4::IpProtocol;
use tunlab_wire::tunnel::{push, EncapSpec, HeaderTemplate, PushMeta, TunnelKind};
use tunlab_wire::vlan::{self, Tci};
use tunlab_wire::{arp, checksum, icmp, ipv4, ipv6, stt, tcp, udp, PacketBuf};

fn mac(s: &str) -> MacAddr {
    s.parse().unwrap()
}

enum L4<'a> {
    Udp(u16, u16, &'a [u8]),
    Tcp(u16, u16, u8, &'a [u8]),
    Icmp(u8, u8, u32, &'a [u8]),
}

/// An IP packet (v4 or v6) with a UDP, TCP or ICMP payload, checksums filled.
fn ip_packet(src: IpAddr, dst: IpAddr, l4: L4) -> Vec<u8> {
    let (proto, mut seg) = match l4 {
        L4::Udp(sp, dp, data) => {
            let mut b = vec![0; 8 + data.len()];
            udp::Repr {
                src_port: sp,
                dst_port: dp,
                payload_len: data.len(),
            }
            .emit(&mut b);
            b[8..].copy_from_slice(data);
            (IpProtocol::Udp, b)
        }
        L4::Tcp(sp, dp, flags, data) => {
            let mut b = vec![0; 20 + data.len()];
            tcp::Repr {
                src_port: sp,
                dst_port: dp,
                seq: 1000,
                ack: 0,
                flags,
                window: 64240,
                urgent: 0,
            }
            .emit(&mut b);
            b[20..].copy_from_slice(data);
            (IpProtocol::Tcp, b)
        }
        L4::Icmp(t, c, rest, data) => {
            let mut b = vec![0; 8 + data.len()];
            b[0] = t;
            b[1] = c;
            b[4..8].copy_from_slice(&rest.to_be_bytes());
            b[8..].copy_from_slice(data);
            let proto = if src.is_ipv4() {
                IpProtocol::Icmp
            } else {
                IpProtocol::Icmpv6
            };
            (proto, b)
        }
    };
    let pseudo = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            checksum::pseudo_v4(s.octets(), d.octets(), proto.into(), seg.len() as u16)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            checksum::pseudo_v6(s.octets(), d.octets(), proto.into(), seg.len() as u32)
        }
        _ => unreachable!(),
    };
    match proto {
        IpProtocol::Udp => udp::Packet::new_checked(&mut seg[..])
            .unwrap()
            .fill_checksum(pseudo),
        IpProtocol::Tcp => tcp::Packet::new_checked(&mut seg[..])
            .unwrap()
            .fill_checksum(pseudo),
        IpProtocol::Icmp => {
            let c = checksum::checksum(&seg);
            seg[2..4].copy_from_slice(&c.to_be_bytes());
        }
        _ => {
            let c = checksum::finish(checksum::sum(pseudo, &seg));
            seg[2..4].copy_from_slice(&c.to_be_bytes());
        }
    }
    wrap_ip(src, dst, proto, &seg)
}

fn wrap_ip(src: IpAddr, dst: IpAddr, proto: IpProtocol, payload: &[u8]) -> Vec<u8> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut b = vec![0; 20 + payload.len()];
            ipv4::Repr {
                src: s,
                dst: d,
                protocol: proto,
                payload_len: payload.len(),
                tos: 0,
                ident: 1,
                dont_frag: false,
                ttl: 64,
            }
            .emit(&mut b);
            b[20..].copy_from_slice(payload);
            b
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut b = vec![0; 40 + payload.len()];
            ipv6::Repr {
                src: s,
                dst: d,
                next_header: proto,
                payload_len: payload.len(),
                traffic_class: 0,
                flow_label: 0x12345,
                hop_limit: 64,
            }
            .emit(&mut b);
            b[40..].copy_from_slice(payload);
            b
        }
        _ => unreachable!(),
    }
}

fn ether(dst: &str, src: &str, et: EtherType, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0; 14 + payload.len()];
    ethernet::Repr {
        dst: mac(dst),
        src: mac(src),
        ethertype: et,
    }
    .emit(&mut b);
    b[14..].copy_from_slice(payload);
    b
}

fn encap(spec: &EncapSpec, inner: &[u8], meta: PushMeta) -> Vec<u8> {
    let t = HeaderTemplate::build(spec).unwrap();
    let mut p = PacketBuf::new(vec![0u8; 512 + inner.len()], 512);
    p.extend(inner).unwrap();
    push(&t, &mut p, meta).unwrap();
    p.data().to_vec()
}

fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())
}

/// Every frame of the sample, in order, with what each shows.
pub fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let tenant_a = "fa:16:3e:7f:a1:49";
    let tenant_b = "fa:16:3e:a0:1f:28";

    // 1. The TRex article's packet: Dot1Q 177 underlay, Geneve VNI 6 with
    //    OVN's option (ingress 3, egress 2), inner UDP 2000 -> 1000.
    let pad = [0u8; 18];
    let inner = ether(
        tenant_b,
        tenant_a,
        EtherType::Ipv4,
        &ip_packet(
            v4([192, 168, 2, 1]),
            v4([192, 168, 2, 181]),
            L4::Udp(2000, 1000, &pad),
        ),
    );
    let mut s = EncapSpec::new(
        TunnelKind::Geneve,
        v4([172, 17, 2, 163]),
        v4([172, 17, 2, 60]),
        Some(6),
    );
    s.eth_src = mac("40:a6:b7:0b:e9:b1");
    s.eth_dst = mac("fa:16:3e:40:4d:7d");
    s.outer_vlan = Some(Tci::from_u16(177));
    s.src_port_min = 57025;
    s.src_port_max = 57025;
    s.csum = true;
    s.dont_frag = false;
    s.geneve_options
        .push(OptionRepr {
            class: OVN_CLASS,
            opt_type: OptType(OVN_TYPE),
            data: &OvnPorts::new(3, 2).unwrap().data(),
        })
        .unwrap();
    out.push((
        "geneve: the TRex article's packet (Dot1Q, OVN option)",
        encap(&s, &inner, PushMeta::default()),
    ));

    // 2. Geneve over IPv6, two options (OVN, and a non-critical one of
    //    another class), inner IPv6 TCP SYN.
    let inner = ether(
        tenant_b,
        tenant_a,
        EtherType::Ipv6,
        &ip_packet(
            v6("fd00:10::1"),
            v6("fd00:10::2"),
            L4::Tcp(40000, 5201, tcp::flags::SYN, b""),
        ),
    );
    let mut s = EncapSpec::new(
        TunnelKind::Geneve,
        v6("fd00::a"),
        v6("fd00::b"),
        Some(0xabcdef),
    );
    s.csum = true;
    s.geneve_options
        .push(OptionRepr {
            class: OVN_CLASS,
            opt_type: OptType(OVN_TYPE),
            data: &OvnPorts::new(0x7fff, 0xffff).unwrap().data(),
        })
        .unwrap();
    s.geneve_options
        .push(OptionRepr {
            class: 0x0105,
            opt_type: OptType(0x01),
            data: &[1, 2, 3, 4, 5, 6, 7, 8],
        })
        .unwrap();
    out.push((
        "geneve over IPv6, two options",
        encap(&s, &inner, PushMeta::default()),
    ));

    // 3. Geneve carrying an IPv4 packet directly (protocol 0x0800).
    let inner = ip_packet(
        v4([10, 1, 0, 1]),
        v4([10, 1, 0, 2]),
        L4::Icmp(8, 0, 0x0001_0001, b"ping"),
    );
    let mut s = EncapSpec::new(
        TunnelKind::Geneve,
        v4([10, 0, 0, 1]),
        v4([10, 0, 0, 2]),
        Some(100),
    );
    s.inner_proto = EtherType::Ipv4;
    out.push((
        "geneve carrying IPv4 (no inner Ethernet), no UDP checksum",
        encap(&s, &inner, PushMeta::default()),
    ));

    // 4. VXLAN with outer UDP checksum, inner TCP with data.
    let inner = ether(
        tenant_b,
        tenant_a,
        EtherType::Ipv4,
        &ip_packet(
            v4([192, 168, 5, 1]),
            v4([192, 168, 5, 2]),
            L4::Tcp(
                5201,
                40000,
                tcp::flags::ACK | tcp::flags::PSH,
                b"tunnelled payload",
            ),
        ),
    );
    let mut s = EncapSpec::new(
        TunnelKind::Vxlan,
        v4([10, 0, 0, 1]),
        v4([10, 0, 0, 2]),
        Some(0x123456),
    );
    s.csum = true;
    out.push((
        "vxlan, outer UDP checksum",
        encap(&s, &inner, PushMeta::default()),
    ));

    // 5. GRE with checksum, key and sequence number, carrying IPv4.
    let inner = ip_packet(
        v4([10, 2, 0, 1]),
        v4([10, 2, 0, 2]),
        L4::Icmp(8, 0, 0x0002_0003, b"gre ping"),
    );
    let mut s = EncapSpec::new(
        TunnelKind::Gre,
        v4([10, 0, 0, 1]),
        v4([10, 0, 0, 2]),
        Some(0xdeadbeef),
    );
    s.csum = true;
    s.gre_seq = true;
    s.inner_proto = EtherType::Ipv4;
    out.push((
        "gre with checksum, key and sequence number, carrying IPv4",
        encap(
            &s,
            &inner,
            PushMeta {
                seq: 42,
                ..PushMeta::default()
            },
        ),
    ));

    // 6. NVGRE: VSID 0x654321, inner ARP request.
    let mut a = [0u8; 28];
    arp::Repr {
        operation: arp::OP_REQUEST,
        sender_mac: mac(tenant_a),
        sender_ip: Ipv4Addr::new(192, 168, 7, 1),
        target_mac: MacAddr([0; 6]),
        target_ip: Ipv4Addr::new(192, 168, 7, 2),
    }
    .emit(&mut a);
    let inner = ether("ff:ff:ff:ff:ff:ff", tenant_a, EtherType::Arp, &a);
    let s = EncapSpec::new(
        TunnelKind::Nvgre,
        v4([10, 0, 0, 1]),
        v4([10, 0, 0, 2]),
        Some(0x654321),
    );
    out.push((
        "nvgre (VSID and FlowID), inner ARP",
        encap(&s, &inner, PushMeta::default()),
    ));

    // 7. STT, one whole frame, 64-bit context ID.
    let inner = ether(
        tenant_b,
        tenant_a,
        EtherType::Ipv4,
        &ip_packet(
            v4([192, 168, 9, 1]),
            v4([192, 168, 9, 2]),
            L4::Udp(1234, 5678, b"stt whole frame"),
        ),
    );
    let s = EncapSpec::new(
        TunnelKind::Stt,
        v4([10, 0, 0, 1]),
        v4([10, 0, 0, 2]),
        Some(0x0102_0304_0506_0708),
    );
    out.push((
        "stt, whole frame",
        encap(
            &s,
            &inner,
            PushMeta {
                seq: 7,
                stt_flags: stt::flags::IPV4,
                ..PushMeta::default()
            },
        ),
    ));

    // 8-9. STT, one frame of 2100 bytes sent as two segments (as TSO would).
    let payload = [0x5au8; 2000];
    let inner = ether(
        tenant_b,
        tenant_a,
        EtherType::Ipv4,
        &ip_packet(
            v4([192, 168, 9, 1]),
            v4([192, 168, 9, 2]),
            L4::Udp(1234, 5678, &payload[..2000 - 42]),
        ),
    );
    let whole = encap(
        &s,
        &inner,
        PushMeta {
            seq: 8,
            ..PushMeta::default()
        },
    );
    let hdr = 14 + 20 + 20;
    let frame = &whole[hdr..];
    for (off, len) in stt::segments(frame.len(), 1400) {
        let mut seg = whole[..hdr].to_vec();
        seg.extend_from_slice(&frame[off..off + len]);
        let total = (seg.len() - 14) as u16;
        seg[16..18].copy_from_slice(&total.to_be_bytes());
        ipv4::Packet::new_checked(&mut seg[14..])
            .unwrap()
            .fill_checksum();
        seg[38..42].copy_from_slice(&stt::seq(frame.len() as u16, off as u16).to_be_bytes());
        let pseudo = checksum::pseudo_v4([10, 0, 0, 1], [10, 0, 0, 2], 6, (seg.len() - 34) as u16);
        tcp::Packet::new_checked(&mut seg[34..])
            .unwrap()
            .fill_checksum(pseudo);
        out.push(("stt, a frame in two segments", seg));
    }

    // 10. QinQ: S-tag 0x88a8 VLAN 5 over C-tag VLAN 100.
    let f = ether(
        tenant_b,
        tenant_a,
        EtherType::Ipv4,
        &ip_packet(
            v4([192, 168, 3, 1]),
            v4([192, 168, 3, 2]),
            L4::Udp(3000, 4000, b"qinq"),
        ),
    );
    let mut p = PacketBuf::new(vec![0u8; 64 + f.len()], 64);
    p.extend(&f).unwrap();
    vlan::push(&mut p, EtherType::Vlan, Tci::from_u16(100)).unwrap();
    vlan::push(&mut p, EtherType::QinQ, Tci::from_u16(0x2005)).unwrap();
    out.push(("qinq: 802.1ad S-tag over 802.1Q C-tag", p.data().to_vec()));

    // 11. ICMP fragmentation needed, quoting a too-big tenant packet.
    let big = ip_packet(
        v4([192, 168, 2, 1]),
        v4([192, 168, 2, 181]),
        L4::Udp(2000, 1000, &[0u8; 1460]),
    );
    let mut m = [0u8; 600];
    let n = icmp::emit_frag_needed(&big, 1450, &mut m).unwrap();
    let ip = wrap_ip(
        v4([192, 168, 2, 254]),
        v4([192, 168, 2, 1]),
        IpProtocol::Icmp,
        &m[..n],
    );
    out.push((
        "icmp fragmentation-needed (path MTU 1450)",
        ether(tenant_a, "02:00:00:00:00:fe", EtherType::Ipv4, &ip),
    ));

    // 12. ICMPv6 packet too big.
    let big = ip_packet(
        v6("fd00:10::1"),
        v6("fd00:10::2"),
        L4::Udp(2000, 1000, &[0u8; 1400]),
    );
    let (src, dst) = (
        "fd00:10::fe".parse::<Ipv6Addr>().unwrap(),
        "fd00:10::1".parse::<Ipv6Addr>().unwrap(),
    );
    let len = icmp::ptb_len(big.len());
    let pseudo = checksum::pseudo_v6(src.octets(), dst.octets(), 58, len as u32);
    let mut m = vec![0u8; len];
    icmp::emit_packet_too_big(&big, 1430, pseudo, &mut m).unwrap();
    let ip = wrap_ip(src.into(), dst.into(), IpProtocol::Icmpv6, &m);
    out.push((
        "icmpv6 packet-too-big (MTU 1430)",
        ether(tenant_a, "02:00:00:00:00:fe", EtherType::Ipv6, &ip),
    ));
    out
}

fn pcap_bytes() -> Vec<u8> {
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        snaplen: 65535,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    for (i, (_, f)) in frames().iter().enumerate() {
        let ts = Duration::from_secs(1_700_000_000 + i as u64);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f))
            .unwrap();
    }
    w.into_writer()
}

#[test]
fn sample_capture_is_current() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../samples/every-encap.pcap"
    );
    let want = pcap_bytes();
    if std::env::var_os("TUNLAB_BLESS").is_some() {
        std::fs::write(path, &want).unwrap();
        let list: String = frames()
            .iter()
            .enumerate()
            .map(|(i, (what, _))| format!("{:>2}  {what}\n", i + 1))
            .collect();
        std::fs::write(
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/every-encap.txt"),
            list,
        )
        .unwrap();
    }
    let have =
        std::fs::read(path).expect("samples/every-encap.pcap is missing: run with TUNLAB_BLESS=1");
    assert!(have == want, "samples/every-encap.pcap differs from what tunlab-wire builds now: rerun with TUNLAB_BLESS=1 and check it with tests/interop");
}
