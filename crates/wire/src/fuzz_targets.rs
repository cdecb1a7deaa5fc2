//! The bodies of the fuzz targets (`fuzz/`), kept here so that the committed
//! corpora also run as ordinary regression tests on the stable toolchain
//! (`tests/fuzz_corpus.rs`). Each function must never panic, whatever the
//! bytes; beyond that each checks the invariants its parser promises.

use crate::buf::PacketBuf;
use crate::tunnel::{self, Decap, PopConfig};
use crate::{
    arp, checksum, ethernet, geneve, gre, icmp, ipv4, ipv6, openflow, stt, tcp, udp, virtio_net,
    vlan, vxlan,
};

/// Every target by name, for the corpus regression test.
/// A fuzz target body: any bytes in, a panic only on a broken invariant.
pub type Target = fn(&[u8]);

pub const TARGETS: &[(&str, Target)] = &[
    ("ethernet", ethernet),
    ("arp", arp),
    ("ipv4", ipv4),
    ("ipv6", ipv6),
    ("udp", udp),
    ("tcp", tcp),
    ("icmp", icmp),
    ("geneve", geneve),
    ("vxlan", vxlan),
    ("gre", gre),
    ("stt", stt),
    ("stt_reassembly", stt_reassembly),
    ("tunnel_pop", tunnel_pop),
    ("virtio_net", virtio_net),
    ("gso", gso),
    ("openflow", openflow),
    ("rewrite", rewrite),
];

/// A header rewrite (the first byte picks the field and the checksum
/// state, the next 16 the value, the rest is the frame): never a panic,
/// and an error leaves the frame as it was.
pub fn rewrite(data: &[u8]) {
    use crate::rewrite::{self as rw, HeaderField, L4Csum};
    let (Some(&pick), Some(v)) = (data.first(), data.get(1..17)) else {
        return;
    };
    let fields = HeaderField::ALL;
    let field = fields[usize::from(pick & 0x7f) % fields.len()];
    let csum = if pick & 0x80 != 0 {
        L4Csum::Partial
    } else {
        L4Csum::Complete
    };
    let value = v.iter().fold(0u128, |a, &x| (a << 8) | u128::from(x));
    let mut frame = data[17..].to_vec();
    if rw::rewrite(&mut frame, field, value, csum).is_err() {
        assert_eq!(frame, &data[17..], "an error changed the frame");
    }
}

/// An OpenFlow byte stream: split into messages as a connection would
/// read it; each message's HELLO elements, ERROR body and the answers
/// built from it hold together.
pub fn openflow(data: &[u8]) {
    let mut rest = data;
    while let Ok(Some(n)) = openflow::frame(rest) {
        let m = openflow::Message::new_checked(rest).expect("framed");
        assert_eq!(m.len(), n);
        if let Ok(b) = openflow::hello_bitmap(&m) {
            if let Some(v) = openflow::agree(0x12, m.version(), b) {
                assert!(v == openflow::OF10 || v == openflow::OF13);
            }
        }
        let _ = openflow::parse_error(&m);
        if let Ok(fm) = openflow::parse_flow_mod(&m) {
            // Every field read lies inside the message.
            for o in &fm.matches {
                assert!(o.value.len() < n && o.mask.is_none_or(|k| k.len() == o.value.len()));
            }
            openflow_actions_rewrite(&fm.actions, &[openflow::OF13, openflow::OF15]);
        }
        if let Ok(po) = openflow::parse_packet_out15(&m) {
            openflow_actions_rewrite(&po.actions, &[openflow::OF13, openflow::OF15]);
        }
        // Bundles: a control reads back as its reply's fields; an added
        // message lies inside the bundle message and frames as itself.
        if let Ok(bc) = openflow::parse_bundle_control(&m) {
            let r = openflow::bundle_control_reply(
                m.version(),
                m.xid(),
                bc.bundle_id,
                bc.typ,
                bc.flags,
            );
            let back =
                openflow::parse_bundle_control(&openflow::Message::new_checked(&r).expect("built"))
                    .expect("a built control reads");
            assert_eq!(
                (back.bundle_id, back.typ, back.flags),
                (bc.bundle_id, bc.typ, bc.flags)
            );
        }
        if let Ok(ba) = openflow::parse_bundle_add(&m) {
            assert!(ba.message.len() < n);
            let _ = openflow::Message::new_checked(ba.message);
        }
        // Every message body any handler reads: parsed or refused, and
        // what parses builds back to what it read.
        if let Ok(mp) = openflow::parse_multipart(&m) {
            if let Ok(r) = openflow::parse_flow_stats_request(mp.body) {
                let mut b = Vec::new();
                openflow::put_match(&mut b, &r.matches);
                assert_eq!(b.len() % 8, 0);
            }
            let _ = openflow::parse_port_request(mp.body);
        }
        if let Ok(po) = openflow::parse_packet_out(&m) {
            let mut b = Vec::new();
            for a in &po.actions {
                a.emit(&mut b);
            }
            assert_eq!(b.len() % 8, 0);
            let again = openflow::packet_out(m.xid(), po.in_port, &po.actions, po.frame);
            if let Ok(m2) = openflow::Message::new_checked(&again) {
                if let Ok(po2) = openflow::parse_packet_out(&m2) {
                    assert_eq!(po2.in_port, po.in_port);
                }
            }
        }
        // OpenFlow 1.0 with Nicira's extensions.
        if let Ok((fm, _)) = openflow::parse_flow_mod10(&m) {
            let mut b = Vec::new();
            for a in &fm.actions {
                a.emit10(&mut b);
            }
            assert_eq!(b.len() % 8, 0);
            openflow_actions_rewrite(&fm.actions, &[openflow::OF10]);
        }
        if let Some(nx) = openflow::parse_nx(&m) {
            if let Ok(fm) = openflow::parse_nx_flow_mod(nx.body) {
                openflow_actions_rewrite(&fm.actions, &[openflow::OF10]);
            }
            let _ = openflow::parse_tlv_table_mod(nx.body);
            let _ = openflow::parse_set_packet_in_format(nx.body);
            if nx.subtype == openflow::NXT_PACKET_IN2 || nx.subtype == openflow::NXT_RESUME {
                openflow_packet_in2_rewrite(nx.body, m.version());
            }
        }
        if let Ok((_, body)) = openflow::parse_stats10(&m) {
            let _ = openflow::parse_nx_stats_request(body);
        }
        if let Ok(pi) = openflow::parse_packet_in(&m) {
            assert!(pi.frame.len() < n);
        }
        if let Ok(pi) = openflow::parse_packet_in10(&m) {
            assert!(pi.frame.len() < n);
        }
        let r = openflow::echo_reply(&m);
        assert_eq!(r.len(), n);
        let e = openflow::error(m.version(), 1, 1, m.xid(), m.bytes());
        assert_eq!(openflow::frame(&e).unwrap(), Some(e.len()));
        rest = &rest[n..];
    }
}

/// An NXT_PACKET_IN2 or NXT_RESUME body of a message of `version`: what
/// reads has a packet no longer than its full length, and written back
/// (both ways) reads again and writes again to the same bytes.
fn openflow_packet_in2_rewrite(body: &[u8], version: u8) {
    let Ok(p) = openflow::parse_packet_in2(body, version) else {
        return;
    };
    assert!(!p.packet.is_empty() && p.full_len as usize >= p.packet.len());
    for write in [openflow::packet_in2, openflow::resume] {
        let b = write(version, 0, &p);
        // Actions can grow when written (a masked set_field as loads):
        // beyond a message's length there is nothing to read back.
        if b.len() > openflow::MAX_LEN {
            continue;
        }
        let m = openflow::Message::new_checked(&b).expect("built");
        let nx = openflow::parse_nx(&m).expect("a Nicira message");
        let back = openflow::parse_packet_in2(nx.body, version).expect("written packet-in reads");
        assert_eq!(write(version, 0, &back), b);
    }
}

/// Actions read from a message, written in each of the `versions` its
/// reader speaks (1.0; 1.3 and 1.5: Nicira's actions, moves as REG_MOVE
/// or COPY_FIELD, loads as REG_LOAD or set_field, clones and cts nesting
/// their version's forms): each writing reads back, and writes again to
/// the same bytes.
fn openflow_actions_rewrite(actions: &[openflow::Action<'_>], versions: &[u8]) {
    for &v in versions {
        let mut b = Vec::new();
        for a in actions {
            a.emit_in(v, &mut b);
        }
        assert_eq!(b.len() % 8, 0);
        if b.len() > openflow::MAX_LEN {
            continue;
        }
        let back = if v == openflow::OF10 {
            openflow::actions10(&b, 0)
        } else {
            let mut ins = Vec::new();
            openflow::put_apply_actions_in(v, &mut ins, actions);
            assert_eq!(&ins[ins.len() - b.len()..], &b[..]);
            openflow::parse_actions(&b, 0)
        }
        .expect("written actions read back");
        let mut again = Vec::new();
        for a in &back {
            a.emit_in(v, &mut again);
        }
        assert_eq!(again, b);
    }
}

/// Ethernet header and a walk over VLAN tags, with push/pop of a tag.
pub fn ethernet(data: &[u8]) {
    // Stripping the tags removes exactly the bytes it says it removed, and
    // what is left has no outer tag to read.
    let (tags, plain) = vlan::strip_tags(data);
    assert_eq!(plain.len() + tags, data.len());
    if tags > 0 {
        assert_eq!(vlan::outer_tci(&plain), 0);
    }
    if let Ok(f) = ethernet::Frame::new_checked(data) {
        let r = ethernet::Repr::parse(&f);
        let mut out = [0u8; ethernet::HEADER_LEN];
        r.emit(&mut out);
        assert_eq!(&out[..], &data[..ethernet::HEADER_LEN]);
        let mut et = f.ethertype();
        let mut rest = f.payload();
        while et.is_vlan_tpid() {
            match vlan::Tag::new_checked(rest) {
                Ok(t) => {
                    et = t.ethertype();
                    rest = &rest[vlan::TAG_LEN..];
                }
                Err(_) => break,
            }
        }
        let mut p = PacketBuf::new(vec![0u8; 8 + data.len()], 8);
        p.extend(data).unwrap_or_default();
        if vlan::push(
            &mut p,
            ethernet::EtherType::QinQ,
            vlan::Tci::from_u16(0x2005),
        )
        .is_ok()
        {
            let popped = vlan::pop(&mut p).expect("a pushed tag pops");
            assert_eq!(popped.tci.to_u16(), 0x2005);
            assert_eq!(p.data(), data);
        }
    }
}

pub fn arp(data: &[u8]) {
    if let Ok(p) = arp::Packet::new_checked(data) {
        let r = arp::Repr::parse(&p);
        let mut out = [0u8; arp::PACKET_LEN];
        r.emit(&mut out);
        assert_eq!(&out[..], &data[..arp::PACKET_LEN]);
    }
}

pub fn ipv4(data: &[u8]) {
    if let Ok(p) = ipv4::Packet::new_checked(data) {
        let _ = (
            p.options(),
            p.src(),
            p.dst(),
            p.frag_offset(),
            p.dscp(),
            p.ecn(),
        );
        assert!(p.payload().len() + p.header_len() == p.total_len() as usize);
        if p.verify_checksum() {
            assert_eq!(
                checksum::fold(checksum::sum(0, &data[..p.header_len()])),
                0xffff
            );
        }
    }
}

pub fn ipv6(data: &[u8]) {
    if let Ok(p) = ipv6::Packet::new_checked(data) {
        let r = ipv6::Repr::parse(&p);
        let mut out = [0u8; ipv6::HEADER_LEN];
        r.emit(&mut out);
        assert_eq!(&out[..], &data[..ipv6::HEADER_LEN]);
        assert_eq!(p.payload().len(), p.payload_len() as usize);
    }
}

pub fn udp(data: &[u8]) {
    if let Ok(p) = udp::Packet::new_checked(data) {
        let _ = p.verify_checksum(checksum::pseudo_v4([1, 2, 3, 4], [5, 6, 7, 8], 17, p.len()));
        assert_eq!(p.payload().len() + udp::HEADER_LEN, p.len() as usize);
    }
}

pub fn tcp(data: &[u8]) {
    if let Ok(p) = tcp::Packet::new_checked(data) {
        let _ = (p.options(), p.payload(), p.verify_checksum(0), p.reserved());
        assert_eq!(p.options().len() + tcp::HEADER_LEN, p.header_len());
    }
}

pub fn icmp(data: &[u8]) {
    if let Ok(p) = icmp::Packet::new_checked(data) {
        let _ = (
            p.data(),
            p.verify_checksum_v4(),
            p.verify_checksum_v6(0),
            p.v6_mtu(),
            p.echo_seq(),
        );
    }
    // The whole reply to a frame too big for a tunnel: addressed back to
    // its sender, and a valid ICMP message.
    if let Some(r) = icmp::too_big_reply(data, 1400) {
        assert_eq!(&r[0..6], &data[6..12]);
        assert!(r.len() >= ethernet::HEADER_LEN + icmp::HEADER_LEN);
    }
    let mut out = [0u8; 600];
    if let Ok(n) = icmp::emit_frag_needed(data, 1400, &mut out) {
        assert!(icmp::Packet::new_checked(&out[..n])
            .map(|p| p.verify_checksum_v4())
            .unwrap_or(false));
    }
}

pub fn geneve(data: &[u8]) {
    if let Ok(p) = geneve::Packet::new_checked(data) {
        let total: usize = p.options().map(|o| o.len()).sum();
        assert_eq!(total, p.options_len(), "options must tile the options area");
        let _ = (p.ovn(), p.check_critical(tunnel::ovn_only), p.payload());
        // Re-emitting what was parsed gives back the same header bytes.
        let r = geneve::Repr::parse(&p);
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut out).expect("a parsed header re-emits");
        assert_eq!(&out[..], &data[..r.buffer_len()]);
    }
}

pub fn vxlan(data: &[u8]) {
    if let Ok(p) = vxlan::Packet::new_checked(data) {
        let r = vxlan::Repr::parse(&p);
        let mut out = [0u8; vxlan::HEADER_LEN];
        r.emit(&mut out);
        assert_eq!(&out[..], &data[..vxlan::HEADER_LEN]);
        let _ = p.check();
    }
}

pub fn gre(data: &[u8]) {
    if let Ok(p) = gre::Packet::new_checked(data) {
        let r = gre::Repr::parse(&p);
        let mut out = [0u8; gre::MAX_HEADER_LEN];
        let n = r.emit(&mut out);
        assert_eq!(n, p.header_len());
        if !p.has_checksum() {
            assert_eq!(&out[..n], &data[..n]);
        }
        let _ = (p.check(), gre::is_nvgre(&p), p.payload());
    }
}

pub fn stt(data: &[u8]) {
    if let Ok(p) = stt::Packet::new_checked(data) {
        let r = stt::Repr::parse(&p);
        let mut out = [0u8; stt::HEADER_LEN];
        r.emit(&mut out);
        assert_eq!(&out[..], &data[..stt::HEADER_LEN]);
    }
}

/// Feed segments cut from the input to a small reassembler: whatever the
/// sequence numbers, it must not panic, and a completed frame has the length
/// its segments announced.
pub fn stt_reassembly(data: &[u8]) {
    let mut r = stt::Reassembler::new(2);
    let mut rest = data;
    let mut now = 0u64;
    while rest.len() >= 7 {
        let seq = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let id = rest[4] as u32 % 3;
        let len = (rest[5] as usize) % (rest.len() - 6 + 1);
        let payload = &rest[6..6 + len];
        rest = &rest[6 + len..];
        now += 1;
        let key = stt::FrameKey {
            src: std::net::Ipv4Addr::LOCALHOST.into(),
            dst: std::net::Ipv4Addr::LOCALHOST.into(),
            src_port: 1,
            packet_id: id,
        };
        if let Ok(stt::Reassembled::Complete(f)) = r.push(key, seq, payload, now) {
            assert_eq!(f.len(), (seq >> 16) as usize);
        }
        if now.is_multiple_of(5) {
            r.expire(now, 3);
        }
    }
}

/// Decapsulate arbitrary bytes: never panic; on error leave the buffer as
/// it was; on success the inner frame lies within the original.
pub fn tunnel_pop(data: &[u8]) {
    for nvgre in [false, true] {
        let cfg = PopConfig {
            gre_as_nvgre: nvgre,
            verify_csum: data.first().is_some_and(|b| b & 1 == 0),
            ..PopConfig::default()
        };
        let mut p = PacketBuf::with_range(data.to_vec(), 0, data.len()).expect("whole buffer");
        let mut m = tunnel::TunnelMetadata::default();
        // The fast path must agree with the general one on every input.
        let mut q = PacketBuf::with_range(data.to_vec(), 0, data.len()).expect("whole buffer");
        let mut mq = tunnel::TunnelMetadata::default();
        let general = tunnel::pop_general(&mut q, &cfg, tunnel::ovn_only, &mut mq);
        let fast = tunnel::pop(&mut p, &cfg, tunnel::ovn_only, &mut m);
        assert_eq!(fast.is_ok(), general.is_ok(), "{fast:?} vs {general:?}");
        if fast.is_ok() {
            assert_eq!((m, p.data()), (mq, q.data()));
        }
        match fast {
            Ok(Decap::Frame) => {
                assert!(p.head() <= data.len());
                let _ = geneve::Options::new(m.options.as_bytes()).count();
            }
            Ok(Decap::SttSegment { .. }) => assert!(p.len() <= data.len()),
            Err(_) => assert_eq!(p.data(), data),
        }
    }
}

pub fn virtio_net(data: &[u8]) {
    if let Ok(h) = virtio_net::Header::new_checked(data) {
        let r = virtio_net::Repr::parse(&h);
        let mut out = [0u8; virtio_net::HEADER_LEN];
        r.emit(&mut out);
        assert_eq!(&out[..], &data[..virtio_net::HEADER_LEN]);
    }
    // A frame's partial checksum: where it says the checksum is lies
    // within the frame, and completing it there never fails.
    if let Some((start, offset)) = virtio_net::partial_csum(data) {
        let mut f = data.to_vec();
        assert!(virtio_net::complete_csum(
            &mut f,
            start as usize,
            offset as usize
        ));
    }
}

/// Cut arbitrary bytes as a TCP super-frame (segment size from the first
/// two bytes) and join what comes out: the segments' payloads are the
/// frame's, none longer than the segment size, and joining them gives the
/// payload back. Then join arbitrary frames carved from the bytes.
pub fn gso(data: &[u8]) {
    use crate::gso::{Coalescer, TcpSuper, MAX_HDR};
    if data.len() < 2 {
        return;
    }
    let mss = u16::from_be_bytes([data[0], data[1]]);
    let frame = &data[2..];
    if let Ok(s) = TcpSuper::parse(frame, mss) {
        let mut h = [0u8; MAX_HDR];
        let mut payload = Vec::new();
        let mut c = Coalescer::new();
        let mut out = Vec::new();
        let mut joined = true;
        for i in 0..s.segments().min(64) {
            let r = s.segment(frame, i, &mut h);
            assert!(r.len() <= mss as usize);
            payload.extend_from_slice(&frame[r]);
            s.segment_into(frame, i, &mut out);
            joined &= c.push(&out);
        }
        if s.segments() <= 64 {
            assert_eq!(payload, frame[s.hdr_len()..]);
        }
        if let Some(j) = c.finish() {
            if joined && s.segments() <= 64 {
                assert_eq!(&j.frame[j.hdr_len..], &frame[s.hdr_len()..]);
            }
        }
    }
    let mut c = Coalescer::new();
    for chunk in frame.chunks(1 + data[0] as usize) {
        if !c.push(chunk) {
            let _ = c.finish();
            c.push(chunk);
        }
    }
    let _ = c.finish();
}
