//! Tunnel encapsulation in place: build, push, pop.
//!
//! The split follows Open vSwitch's native tunnels:
//!
//! * **build** ([`HeaderTemplate::build`]), once per tunnel or flow: the
//!   whole outer header stack (Ethernet, optional 802.1Q tag, IPv4 or IPv6,
//!   UDP / GRE / STT's TCP, tunnel header with options) is written into a
//!   fixed array, and the parts of the checksums that never change are summed.
//! * **push** ([`push`]), per packet: copy the template into the buffer's
//!   headroom in front of the tenant frame, then patch only what varies:
//!   lengths, the source port from the inner flow hash, and checksums.
//!   The payload never moves and nothing is allocated.
//! * **pop** ([`pop`]), per packet: validate every outer layer in one pass,
//!   fill [`TunnelMetadata`] (outer addresses, VNI/key, options) and strip the
//!   headers, leaving the tenant frame in the buffer.
//!
//! QinQ is not an IP tunnel: it is [`crate::vlan::push`] / [`crate::vlan::pop`].
//!
//! Here the types all three share; [`template`] builds and pushes,
//! [`pop`] validates and strips (a general pass and a fast path for the
//! common IPv4 cases), [`socket`] writes and reads the tunnel header alone
//! for tunnels sent through the kernel's sockets.

use crate::buf::PacketBuf;
use crate::checksum;
use crate::error::{Error, ErrorKind, Layer, Result};
use crate::ethernet::{self, EtherType, MacAddr};
use crate::geneve::{self, OptType, OptionsBuf};
use crate::ipv4::{self, IpProtocol};
use crate::vlan::{self, Tci};
use crate::{be16, flowhash, gre, ipv6, put16, put32, stt, tcp, udp, vxlan, Vni};
use std::net::IpAddr;

mod pop;
mod socket;
mod template;

pub use pop::{pop, pop_general, stt_frame};
pub use socket::{
    gre_header, pop_gre_ipv4, pop_udp_payload, stt_segment_header, udp_tunnel_header,
};
pub use template::{check_headroom, push, HeaderTemplate, PushMeta};

/// The IP tunnel protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    Geneve,
    Vxlan,
    Gre,
    Nvgre,
    Stt,
}

impl TunnelKind {
    pub const ALL: [TunnelKind; 5] = [
        TunnelKind::Geneve,
        TunnelKind::Vxlan,
        TunnelKind::Gre,
        TunnelKind::Nvgre,
        TunnelKind::Stt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::Geneve => "geneve",
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Gre => "gre",
            TunnelKind::Nvgre => "nvgre",
            TunnelKind::Stt => "stt",
        }
    }

    /// The IANA destination port (UDP for Geneve/VXLAN, TCP for STT).
    pub fn default_port(self) -> u16 {
        match self {
            TunnelKind::Geneve => geneve::UDP_PORT,
            TunnelKind::Vxlan => vxlan::UDP_PORT,
            TunnelKind::Stt => stt::TCP_PORT,
            TunnelKind::Gre | TunnelKind::Nvgre => 0,
        }
    }
}

/// Everything that defines one tunnel's outer headers.
#[derive(Debug, Clone, PartialEq)]
pub struct EncapSpec {
    pub kind: TunnelKind,
    pub eth_src: MacAddr,
    pub eth_dst: MacAddr,
    /// An 802.1Q tag on the underlay (the TRex article's Dot1Q(vlan=177)).
    pub outer_vlan: Option<Tci>,
    /// Outer source and destination; both IPv4 or both IPv6.
    pub src: IpAddr,
    pub dst: IpAddr,
    pub ttl: u8,
    pub tos: u8,
    /// IPv4 DF bit on the outer header.
    pub dont_frag: bool,
    /// Destination port for Geneve, VXLAN and STT.
    pub dst_port: u16,
    /// Source port range for the flow-hash entropy.
    pub src_port_min: u16,
    pub src_port_max: u16,
    /// VNI (Geneve, VXLAN), VSID (NVGRE, low 24 bits), key (GRE, 32 bits)
    /// or context ID (STT, 64 bits). `None` for GRE means no key field.
    pub key: Option<u64>,
    /// Outer UDP checksum (Geneve, VXLAN) or GRE checksum. STT's TCP
    /// checksum is mandatory: `true` computes it in software, `false`
    /// leaves it partial (the pseudo-header sum in the field, as Linux's
    /// CHECKSUM_PARTIAL and virtio-net's NEEDS_CSUM expect) for the kernel
    /// or NIC to complete, at [`HeaderTemplate::stt_csum_offset`].
    pub csum: bool,
    /// GRE only: write a sequence number (from [`PushMeta::seq`]).
    pub gre_seq: bool,
    /// Geneve only: the option TLVs. The C bit is set if any is critical.
    pub geneve_options: OptionsBuf,
    /// What the tunnel carries: Ethernet (0x6558) or, for Geneve and GRE,
    /// an IPv4/IPv6 packet.
    pub inner_proto: EtherType,
}

impl EncapSpec {
    /// A spec with the usual defaults: TTL 64, DF, IANA port, source ports
    /// 49152-65535, Ethernet payload, no options, no checksum (except
    /// STT's, which is mandatory and computed in software by default).
    pub fn new(kind: TunnelKind, src: IpAddr, dst: IpAddr, key: Option<u64>) -> EncapSpec {
        EncapSpec {
            kind,
            eth_src: MacAddr([0x02, 0, 0, 0, 0, 1]),
            eth_dst: MacAddr([0x02, 0, 0, 0, 0, 2]),
            outer_vlan: None,
            src,
            dst,
            ttl: 64,
            tos: 0,
            dont_frag: true,
            dst_port: kind.default_port(),
            src_port_min: 49152,
            src_port_max: 65535,
            key,
            csum: kind == TunnelKind::Stt,
            gre_seq: false,
            geneve_options: OptionsBuf::new(),
            inner_proto: EtherType::TransEtherBridging,
        }
    }
}

/// The longest outer header stack: Ethernet, one tag, IPv6, UDP, Geneve
/// with 252 bytes of options.
pub const MAX_OVERHEAD: usize = ethernet::HEADER_LEN
    + vlan::TAG_LEN
    + ipv6::HEADER_LEN
    + udp::HEADER_LEN
    + geneve::HEADER_LEN
    + geneve::MAX_OPTIONS_LEN;

/// What a receiver learned from the outer headers: OVS's `flow_tnl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelMetadata {
    pub kind: TunnelKind,
    /// Outer source and destination (`tun_src`, `tun_dst`).
    pub src: IpAddr,
    pub dst: IpAddr,
    pub tos: u8,
    pub ttl: u8,
    /// UDP/TCP ports (zero for GRE).
    pub src_port: u16,
    pub dst_port: u16,
    /// `tun_id`: VNI, VSID, GRE key or STT context ID.
    pub tun_id: u64,
    /// The GRE key was present (a keyless GRE packet has `tun_id` 0).
    pub key_present: bool,
    /// NVGRE's FlowID.
    pub flow_id: u8,
    /// Geneve's O bit.
    pub oam: bool,
    /// The outer checksum was present (and, if asked, verified).
    pub csum: bool,
    /// The underlay 802.1Q tag, if any.
    pub outer_vlan: Option<Tci>,
    /// Geneve's options, copied (at most 252 bytes, inline).
    pub options: OptionsBuf,
    /// What the inner payload is (Ethernet unless Geneve/GRE says otherwise).
    pub inner_proto: EtherType,
}

impl TunnelMetadata {
    /// Start filling a reused slot for a new packet: outer addresses and
    /// ports as given, everything else back to its default, without
    /// zeroing the 252-byte options array (only its length).
    #[inline]
    fn begin(&mut self, kind: TunnelKind, src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16) {
        self.kind = kind;
        self.src = src;
        self.dst = dst;
        self.src_port = src_port;
        self.dst_port = dst_port;
        self.tos = 0;
        self.ttl = 0;
        self.tun_id = 0;
        self.key_present = true;
        self.flow_id = 0;
        self.oam = false;
        self.csum = false;
        self.outer_vlan = None;
        self.options.clear();
        self.inner_proto = EtherType::TransEtherBridging;
    }
}

impl Default for TunnelMetadata {
    fn default() -> TunnelMetadata {
        TunnelMetadata {
            kind: TunnelKind::Vxlan,
            src: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            dst: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            tos: 0,
            ttl: 0,
            src_port: 0,
            dst_port: 0,
            tun_id: 0,
            key_present: false,
            flow_id: 0,
            oam: false,
            csum: false,
            outer_vlan: None,
            options: OptionsBuf::new(),
            inner_proto: EtherType::TransEtherBridging,
        }
    }
}

/// What [`pop`] accepts.
#[derive(Debug, Clone, Copy)]
pub struct PopConfig {
    pub geneve_port: u16,
    pub vxlan_port: u16,
    pub stt_port: u16,
    /// Verify outer checksums in software (off when the NIC or kernel has).
    pub verify_csum: bool,
    /// Read keyed GRE carrying Ethernet (no checksum, no sequence number) as
    /// NVGRE: VSID and FlowID instead of a 32-bit key. The two are the same
    /// bytes on the wire (RFC 7637 § 3.2), so only configuration can tell.
    pub gre_as_nvgre: bool,
}

impl Default for PopConfig {
    fn default() -> PopConfig {
        PopConfig {
            geneve_port: geneve::UDP_PORT,
            vxlan_port: vxlan::UDP_PORT,
            stt_port: stt::TCP_PORT,
            verify_csum: true,
            gre_as_nvgre: false,
        }
    }
}

/// The result of [`pop`]; the tunnel metadata went into the caller's slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decap {
    /// The tenant frame is now the buffer's content.
    Frame,
    /// One segment of a larger STT frame: the buffer holds this segment's
    /// part of the STT frame; feed it to a [`stt::Reassembler`] with
    /// `key` and `seq`, then finish with [`stt_frame`]. The metadata has
    /// the outer headers' fields; `tun_id` comes with the STT header.
    SttSegment { key: stt::FrameKey, seq: u32 },
}

/// Only OVN's option is known unless the caller says otherwise.
pub fn ovn_only(class: u16, typ: OptType) -> bool {
    class == geneve::OVN_CLASS && typ == OptType(geneve::OVN_TYPE)
}

/// Which tunnel kind, if any, an outer frame belongs to, without validating
/// it: for counting and for the decoder's layer walk.
pub fn classify(proto: IpProtocol, dst_port: u16, cfg: &PopConfig) -> Option<TunnelKind> {
    match proto {
        IpProtocol::Udp if dst_port == cfg.geneve_port => Some(TunnelKind::Geneve),
        IpProtocol::Udp if dst_port == cfg.vxlan_port => Some(TunnelKind::Vxlan),
        IpProtocol::Tcp if dst_port == cfg.stt_port => Some(TunnelKind::Stt),
        IpProtocol::Gre => Some(TunnelKind::Gre),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geneve::{OptionRepr, OvnPorts};
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const HEADROOM: usize = MAX_OVERHEAD;

    fn tenant_frame(len: usize) -> Vec<u8> {
        let mut f: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
        f[12] = 0x08;
        f[13] = 0x00;
        f
    }

    fn v4() -> (IpAddr, IpAddr) {
        (
            Ipv4Addr::new(172, 17, 2, 163).into(),
            Ipv4Addr::new(172, 17, 2, 60).into(),
        )
    }

    fn v6() -> (IpAddr, IpAddr) {
        (
            "fd00::1".parse::<Ipv6Addr>().unwrap().into(),
            "fd00::2".parse::<Ipv6Addr>().unwrap().into(),
        )
    }

    fn spec(kind: TunnelKind, (s, d): (IpAddr, IpAddr), csum: bool) -> EncapSpec {
        let mut sp = EncapSpec::new(kind, s, d, Some(0x00ab_cdef));
        sp.csum = csum && kind != TunnelKind::Nvgre;
        if kind == TunnelKind::Geneve {
            sp.geneve_options
                .push(OptionRepr {
                    class: geneve::OVN_CLASS,
                    opt_type: OptType(geneve::OVN_TYPE),
                    data: &OvnPorts::new(3, 2).unwrap().data(),
                })
                .unwrap();
        }
        sp
    }

    /// A tenant frame of `len` bytes, encapsulated per `sp`.
    fn encapsulated(sp: &EncapSpec, len: usize) -> PacketBuf<Vec<u8>> {
        let t = HeaderTemplate::build(sp).unwrap();
        let mut p = PacketBuf::new(vec![0u8; HEADROOM + len], HEADROOM);
        p.extend(&tenant_frame(len)).unwrap();
        push(&t, &mut p, PushMeta::default()).unwrap();
        p
    }

    /// What a NIC or the kernel does with a partial checksum.
    fn complete_partial(d: &mut [u8], start: usize, off: usize) {
        let c = checksum::finish(checksum::sum(0, &d[start..]));
        d[start + off..start + off + 2].copy_from_slice(&c.to_be_bytes());
    }

    /// Segments built for a raw socket, behind an IPv4 header as the
    /// kernel writes it, decapsulate and reassemble into the frame.
    #[test]
    fn stt_raw_segments_reassemble() {
        let (src, dst): (IpAddr, IpAddr) = (v4().0, v4().1);
        let mut frame = vec![0u8; stt::HEADER_LEN];
        stt::Repr {
            context_id: 0xdead_beef_0042,
            ..stt::Repr::default()
        }
        .emit(&mut frame);
        frame.extend_from_slice(&tenant_frame(3000));
        let mut r = stt::Reassembler::new(2);
        let mut done = None;
        for (off, len) in stt::segments(frame.len(), 1400) {
            let part = &frame[off..off + len];
            let h = stt_segment_header(src, dst, 50000, stt::TCP_PORT, frame.len(), off, 9, part)
                .unwrap();
            let mut pkt = vec![0u8; 14];
            pkt[12] = 0x08;
            let mut ip = [0u8; 20];
            let IpAddr::V4(s4) = src else { unreachable!() };
            let IpAddr::V4(d4) = dst else { unreachable!() };
            ipv4::Repr {
                src: s4,
                dst: d4,
                protocol: IpProtocol::Tcp,
                payload_len: 20 + len,
                tos: 0,
                ident: 1,
                dont_frag: true,
                ttl: 64,
            }
            .emit(&mut ip);
            pkt.extend_from_slice(&ip);
            pkt.extend_from_slice(&h);
            pkt.extend_from_slice(part);
            let n = pkt.len();
            let mut p = PacketBuf::with_range(pkt, 0, n).unwrap();
            let mut m = TunnelMetadata::default();
            match pop(&mut p, &PopConfig::default(), ovn_only, &mut m).unwrap() {
                Decap::SttSegment { key, seq } => {
                    if let stt::Reassembled::Complete(f) = r.push(key, seq, p.data(), 0).unwrap() {
                        let hl = stt_frame(f, &mut m).unwrap();
                        assert_eq!(m.tun_id, 0xdead_beef_0042);
                        done = Some(f[hl..].to_vec());
                    }
                }
                Decap::Frame => panic!("a 3018-byte frame in 1400-byte segments is not whole"),
            }
        }
        assert_eq!(done.unwrap(), tenant_frame(3000));
        // A frame that fits one segment is a whole frame.
        let h = stt_segment_header(src, dst, 1, 2, 100, 0, 0, &frame[..100]).unwrap();
        assert_eq!(
            stt::split_seq(u32::from_be_bytes([h[4], h[5], h[6], h[7]])),
            (100, 0)
        );
        assert!(stt_segment_header(src, dst, 1, 2, 100, 90, 0, &frame[..20]).is_err());
    }

    #[test]
    fn stt_partial_checksum_is_completed_by_offload() {
        let t = HeaderTemplate::build(&spec(TunnelKind::Stt, v4(), false)).unwrap();
        let (start, off) = t.stt_csum_offset().unwrap();
        assert_eq!(start, 14 + 20);
        assert_eq!(off, 16);
        let mut p = PacketBuf::new(vec![0u8; HEADROOM + 100], HEADROOM);
        p.extend(&tenant_frame(100)).unwrap();
        push(&t, &mut p, PushMeta::default()).unwrap();
        let mut m = TunnelMetadata::default();
        let mut q = p.clone();
        // Partial: the receiver that verifies refuses it until completed.
        assert!(pop(&mut q, &PopConfig::default(), ovn_only, &mut m).is_err());
        complete_partial(p.data_mut(), start, off);
        assert_eq!(
            pop(&mut p, &PopConfig::default(), ovn_only, &mut m).unwrap(),
            Decap::Frame
        );
        assert_eq!(p.data(), &tenant_frame(100)[..]);
        // Computed in software: nothing left to complete.
        let t = HeaderTemplate::build(&spec(TunnelKind::Stt, v4(), true)).unwrap();
        assert_eq!(t.stt_csum_offset(), None);
    }

    fn roundtrip(sp: &EncapSpec, inner: &[u8]) -> TunnelMetadata {
        let t = HeaderTemplate::build(sp).unwrap();
        let mut p = PacketBuf::new(vec![0u8; HEADROOM + inner.len()], HEADROOM);
        p.extend(inner).unwrap();
        let payload_at = p.head();
        push(
            &t,
            &mut p,
            PushMeta {
                seq: 77,
                ..PushMeta::default()
            },
        )
        .unwrap();
        assert_eq!(p.len(), t.overhead() + inner.len());
        assert_eq!(p.head() + t.overhead(), payload_at, "payload moved");
        if let Some((start, off)) = t.stt_csum_offset() {
            complete_partial(p.data_mut(), start, off);
        }
        let cfg = PopConfig {
            gre_as_nvgre: sp.kind == TunnelKind::Nvgre,
            ..PopConfig::default()
        };
        let mut m = TunnelMetadata::default();
        assert_eq!(pop(&mut p, &cfg, ovn_only, &mut m).unwrap(), Decap::Frame);
        assert_eq!(p.data(), inner);
        assert_eq!(p.head(), payload_at);
        m
    }

    #[test]
    fn every_kind_both_families_both_checksums() {
        for kind in TunnelKind::ALL {
            for fam in [v4(), v6()] {
                for csum in [false, true] {
                    let sp = spec(kind, fam, csum);
                    let m = roundtrip(&sp, &tenant_frame(1500));
                    assert_eq!(m.kind, kind);
                    assert_eq!((m.src, m.dst), fam);
                    assert_eq!(m.tun_id, 0x00ab_cdef, "{kind:?}");
                    assert_eq!(m.ttl, 64);
                    if matches!(kind, TunnelKind::Geneve | TunnelKind::Vxlan) {
                        assert_eq!(m.csum, csum);
                        assert!(m.src_port >= 49152);
                        assert_eq!(m.dst_port, kind.default_port());
                    }
                    if kind == TunnelKind::Geneve {
                        assert_eq!(geneve::Options::new(m.options.as_bytes()).count(), 1);
                    }
                }
            }
        }
    }

    #[test]
    fn outer_headers_agree_with_etherparse() {
        for kind in TunnelKind::ALL {
            for csum in [false, true] {
                let sp = spec(kind, v4(), csum);
                let t = HeaderTemplate::build(&sp).unwrap();
                let inner = tenant_frame(200);
                let mut p = PacketBuf::new(vec![0u8; HEADROOM + inner.len()], HEADROOM);
                p.extend(&inner).unwrap();
                push(&t, &mut p, PushMeta::default()).unwrap();
                if let Some((start, off)) = t.stt_csum_offset() {
                    // Left partial: what offload completes must then agree.
                    complete_partial(p.data_mut(), start, off);
                }
                let s = etherparse::SlicedPacket::from_ethernet(p.data()).unwrap();
                let Some(etherparse::NetSlice::Ipv4(ip)) = &s.net else {
                    panic!("ipv4")
                };
                let h = ip.header().to_header();
                assert_eq!(h.header_checksum, h.calc_header_checksum());
                assert_eq!(h.total_len as usize, p.len() - 14);
                match &s.transport {
                    Some(etherparse::TransportSlice::Udp(u)) => {
                        let uh = u.to_header();
                        if csum {
                            assert_eq!(
                                uh.checksum,
                                uh.calc_checksum_ipv4(&h, u.payload()).unwrap()
                            );
                        } else {
                            assert_eq!(uh.checksum, 0);
                        }
                    }
                    Some(etherparse::TransportSlice::Tcp(tc)) => {
                        let th = tc.to_header();
                        assert_eq!(
                            th.checksum,
                            th.calc_checksum_ipv4(&h, tc.payload()).unwrap()
                        );
                        assert_eq!(tc.destination_port(), stt::TCP_PORT);
                    }
                    _ => assert!(matches!(kind, TunnelKind::Gre | TunnelKind::Nvgre)),
                }
            }
        }
    }

    #[test]
    fn unknown_critical_option_is_refused_and_buffer_untouched() {
        let sp = spec(TunnelKind::Geneve, v4(), true);
        let mut p = encapsulated(&sp, 100);
        let before = p.data().to_vec();
        let e = pop(
            &mut p,
            &PopConfig::default(),
            |_, _| false,
            &mut TunnelMetadata::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::UnknownCriticalOption {
                class: 0x0102,
                typ: 0x80
            }
        );
        // Outer Ethernet 14 + IPv4 20 + UDP 8 + Geneve 8: the option's offset.
        assert_eq!(e.offset, 50);
        assert_eq!(p.data(), &before[..]);
    }

    #[test]
    fn corrupted_packets_name_layer_and_offset() {
        let sp = spec(TunnelKind::Vxlan, v4(), true);
        let p = encapsulated(&sp, 100);
        let good = p.data().to_vec();
        let check = |at: usize, xor: u8, layer: Layer, off: usize| {
            let mut b = good.clone();
            b[at] ^= xor;
            let mut q = PacketBuf::with_range(b, 0, good.len()).unwrap();
            let e = pop(
                &mut q,
                &PopConfig::default(),
                ovn_only,
                &mut TunnelMetadata::default(),
            )
            .unwrap_err();
            assert_eq!((e.layer, e.offset), (layer, off), "{e}");
        };
        check(14 + 8, 1, Layer::Ipv4, 24); // TTL changed: header checksum fails
        check(14 + 20 + 8 + 9, 1, Layer::Udp, 40); // payload changed: UDP checksum fails
        let mut nock = good.clone();
        nock[40] = 0;
        nock[41] = 0; // no UDP checksum, then clear the I flag
        nock[42] = 0;
        let mut q = PacketBuf::with_range(nock, 0, good.len()).unwrap();
        let e = pop(
            &mut q,
            &PopConfig::default(),
            ovn_only,
            &mut TunnelMetadata::default(),
        )
        .unwrap_err();
        assert_eq!((e.layer, e.offset), (Layer::Vxlan, 42), "{e}");
    }

    #[test]
    fn spec_errors() {
        let (s4, _) = v4();
        let (_, d6) = v6();
        let e =
            HeaderTemplate::build(&EncapSpec::new(TunnelKind::Vxlan, s4, d6, Some(1))).unwrap_err();
        assert!(
            e.to_string().contains("must both be IPv4 or both IPv6"),
            "{e}"
        );
        let (s, d) = v4();
        let e = HeaderTemplate::build(&EncapSpec::new(TunnelKind::Vxlan, s, d, Some(1 << 24)))
            .unwrap_err();
        assert!(e.to_string().contains("24 bits"));
        let mut sp = spec(TunnelKind::Geneve, v4(), false);
        sp.kind = TunnelKind::Vxlan;
        assert!(HeaderTemplate::build(&sp).is_err());
    }

    #[test]
    fn stt_segments_reassemble() {
        let sp = spec(TunnelKind::Stt, v4(), true);
        let t = HeaderTemplate::build(&sp).unwrap();
        let inner = tenant_frame(9000);
        let mut p = PacketBuf::new(vec![0u8; HEADROOM + inner.len()], HEADROOM);
        p.extend(&inner).unwrap();
        push(
            &t,
            &mut p,
            PushMeta {
                seq: 4242,
                ..PushMeta::default()
            },
        )
        .unwrap();
        // Segment like TSO would: same outer headers, each with its slice of
        // the STT frame and seq = frame length << 16 | offset.
        let whole = p.data().to_vec();
        let hdr = t.overhead() - stt::HEADER_LEN; // up to the end of TCP
        let frame = &whole[hdr..];
        let mut r = stt::Reassembler::new(4);
        let mut got = None;
        for (off, len) in stt::segments(frame.len(), 1448) {
            let mut seg = whole[..hdr].to_vec();
            seg.extend_from_slice(&frame[off..off + len]);
            let ip_total = (seg.len() - 14) as u16;
            seg[16..18].copy_from_slice(&ip_total.to_be_bytes());
            seg[24..26].copy_from_slice(&[0, 0]);
            let c = checksum::checksum(&seg[14..34]);
            seg[24..26].copy_from_slice(&c.to_be_bytes());
            seg[38..42].copy_from_slice(&stt::seq(frame.len() as u16, off as u16).to_be_bytes());
            let pseudo = checksum::pseudo_v4(
                [172, 17, 2, 163],
                [172, 17, 2, 60],
                6,
                (seg.len() - 34) as u16,
            );
            tcp::Packet::new_checked(&mut seg[34..])
                .unwrap()
                .fill_checksum(pseudo);
            let n = seg.len();
            let mut q = PacketBuf::with_range(seg, 0, n).unwrap();
            let mut meta = TunnelMetadata::default();
            match pop(&mut q, &PopConfig::default(), ovn_only, &mut meta).unwrap() {
                Decap::SttSegment { key, seq } => {
                    assert_eq!(key.packet_id, 4242);
                    if let stt::Reassembled::Complete(f) = r.push(key, seq, q.data(), 0).unwrap() {
                        let hl = stt_frame(f, &mut meta).unwrap();
                        got = Some((meta.tun_id, f[hl..].to_vec()));
                    }
                }
                Decap::Frame => panic!("a segment was taken for a whole frame"),
            }
        }
        assert_eq!(got, Some((0x00ab_cdef, inner)));
    }

    #[test]
    fn socket_path_header_round_trip() {
        let mut opts = OptionsBuf::new();
        opts.push(OptionRepr {
            class: geneve::OVN_CLASS,
            opt_type: OptType(geneve::OVN_TYPE),
            data: &OvnPorts::new(3, 2).unwrap().data(),
        })
        .unwrap();
        for kind in [TunnelKind::Geneve, TunnelKind::Vxlan] {
            let mut b = [0xa5u8; 300];
            let o = if kind == TunnelKind::Geneve {
                opts.as_bytes()
            } else {
                &[]
            };
            let n = udp_tunnel_header(kind, Vni::new(77).unwrap(), o, &mut b).unwrap();
            b[n..n + 14].copy_from_slice(&tenant_frame(14));
            let mut m = TunnelMetadata::default();
            let (src, dst) = (
                "10.0.0.1:50000".parse().unwrap(),
                "10.0.0.2:6081".parse().unwrap(),
            );
            let at = pop_udp_payload(kind, &b[..n + 14], src, dst, ovn_only, &mut m).unwrap();
            assert_eq!((at, m.tun_id, m.src, m.kind), (n, 77, src.ip(), kind));
            if kind == TunnelKind::Geneve {
                assert_eq!(m.options.as_bytes(), opts.as_bytes());
                assert!(
                    pop_udp_payload(kind, &b[..n + 14], src, dst, |_, _| false, &mut m).is_err()
                );
            }
        }
        assert!(
            udp_tunnel_header(TunnelKind::Gre, Vni::new(1).unwrap(), &[], &mut [0u8; 64]).is_err()
        );
    }

    #[test]
    fn gre_socket_path_round_trip() {
        for (nvgre, csum) in [(false, false), (false, true), (true, false)] {
            let mut g = [0u8; 16];
            let n = gre_header(nvgre, Some(0x00ab_cdef), csum, 0x5a, &mut g).unwrap();
            let mut body = g[..n].to_vec();
            body.extend_from_slice(&tenant_frame(60));
            if csum {
                gre::fill_checksum(&mut body);
            }
            let mut pkt = vec![0u8; 20 + body.len()];
            ipv4::Repr {
                src: "10.0.0.1".parse().unwrap(),
                dst: "10.0.0.2".parse().unwrap(),
                protocol: IpProtocol::Gre,
                payload_len: body.len(),
                tos: 0,
                ident: 0,
                dont_frag: true,
                ttl: 64,
            }
            .emit(&mut pkt);
            pkt[20..].copy_from_slice(&body);
            let mut m = TunnelMetadata::default();
            let at = pop_gre_ipv4(&pkt, nvgre, true, &mut m).unwrap();
            assert_eq!(&pkt[at..], &tenant_frame(60)[..]);
            assert_eq!(m.tun_id, 0x00ab_cdef);
            assert_eq!(m.flow_id, if nvgre { 0x5a } else { 0 });
            assert_eq!(m.csum, csum);
            if csum {
                pkt[40] ^= 1;
                assert!(pop_gre_ipv4(&pkt, nvgre, true, &mut m).is_err());
            }
        }
    }

    #[test]
    fn qinq_overhead_and_mtu() {
        let t = HeaderTemplate::build(&spec(TunnelKind::Geneve, v4(), false)).unwrap();
        // IPv4 20 + UDP 8 + Geneve 8 + OVN option 8, plus the inner Ethernet
        // header the tenant MTU does not count: callers add 14.
        assert_eq!(t.mtu_overhead(), 44);
        let t = HeaderTemplate::build(&spec(TunnelKind::Vxlan, v6(), false)).unwrap();
        assert_eq!(t.mtu_overhead(), 56);
    }

    fn any_kind() -> impl Strategy<Value = TunnelKind> {
        prop_oneof![
            Just(TunnelKind::Geneve),
            Just(TunnelKind::Vxlan),
            Just(TunnelKind::Gre),
            Just(TunnelKind::Nvgre),
            Just(TunnelKind::Stt)
        ]
    }

    proptest! {
        #[test]
        fn push_pop_roundtrip(kind in any_kind(), v6f in any::<bool>(), csum in any::<bool>(), key in 0u64..0x100_0000,
                              tos in any::<u8>(), ttl in 1u8..=255, len in 14usize..3000, vlan in any::<Option<u16>>()) {
            let fam = if v6f { v6() } else { v4() };
            let mut sp = spec(kind, fam, csum);
            sp.key = Some(key);
            sp.tos = tos;
            sp.ttl = ttl;
            sp.outer_vlan = vlan.map(Tci::from_u16);
            let m = roundtrip(&sp, &tenant_frame(len));
            prop_assert_eq!(m.tun_id, key);
            prop_assert_eq!((m.tos, m.ttl), (tos, ttl));
            prop_assert_eq!(m.outer_vlan, sp.outer_vlan);
        }

        /// The fast path and the general path agree on every packet:
        /// built ones with random fields, then with one random byte changed.
        #[test]
        fn fast_and_general_pop_agree(kind in any_kind(), csum in any::<bool>(), len in 14usize..300,
                                      flip in proptest::option::of((0usize..400, any::<u8>())), verify in any::<bool>(),
                                      as_nvgre in any::<bool>()) {
            let sp = spec(kind, v4(), csum);
            let mut b = encapsulated(&sp, len).data().to_vec();
            if let Some((at, x)) = flip {
                let at = at % b.len();
                b[at] ^= x;
            }
            let cfg = PopConfig { verify_csum: verify, gre_as_nvgre: as_nvgre, ..PopConfig::default() };
            let n = b.len();
            let (mut p1, mut p2) = (PacketBuf::with_range(b.clone(), 0, n).unwrap(), PacketBuf::with_range(b, 0, n).unwrap());
            let (mut m1, mut m2) = (TunnelMetadata::default(), TunnelMetadata::default());
            let r1 = pop(&mut p1, &cfg, ovn_only, &mut m1);
            let r2 = pop_general(&mut p2, &cfg, ovn_only, &mut m2);
            prop_assert_eq!(r1.is_ok(), r2.is_ok(), "{:?} vs {:?}", r1, r2);
            if r1.is_ok() {
                prop_assert_eq!(m1, m2);
                prop_assert_eq!(p1.data(), p2.data());
            }
        }

        #[test]
        fn pop_random_bytes_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let n = b.len();
            let mut q = PacketBuf::with_range(b, 0, n).unwrap();
            let _ = pop(&mut q, &PopConfig::default(), ovn_only, &mut TunnelMetadata::default());
        }
    }
}
