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

use crate::buf::PacketBuf;
use crate::checksum;
use crate::error::{Error, ErrorKind, Layer, Result};
use crate::ethernet::{self, EtherType, MacAddr};
use crate::geneve::{self, OptType, OptionsBuf};
use crate::ipv4::{self, IpProtocol};
use crate::vlan::{self, Tci};
use crate::{be16, flowhash, gre, ipv6, put16, put32, stt, tcp, udp, vxlan, Vni};
use std::net::IpAddr;

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

/// The outer header stack of one tunnel, built once and copied per packet.
#[derive(Clone)]
pub struct HeaderTemplate {
    bytes: [u8; MAX_OVERHEAD],
    len: u16,
    /// Offset of the IP header.
    ip: u8,
    /// Offset of the UDP, GRE or TCP header.
    l4: u8,
    kind: TunnelKind,
    v6: bool,
    csum: bool,
    src_port_min: u16,
    src_port_max: u16,
    /// IPv4: the header's sum with zero length and zero checksum.
    ip_sum: u64,
    /// The pseudo-header's sum without its length (UDP, TCP).
    pseudo_sum: u64,
    /// Offset of NVGRE's FlowID byte / GRE's sequence number, if any.
    gre_flow_id: Option<u8>,
    gre_seq_at: Option<u8>,
}

impl std::fmt::Debug for HeaderTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderTemplate")
            .field("kind", &self.kind)
            .field("len", &self.len)
            .field("bytes", &&self.bytes[..self.len as usize])
            .finish()
    }
}

fn spec_err(field: &'static str, reason: &'static str) -> Error {
    Error::invalid(Layer::Tunnel, field, 0, reason)
}

impl HeaderTemplate {
    /// Build the outer headers for `spec`, refusing combinations that cannot
    /// be sent (mixed IP families, a VNI over 24 bits, options on a tunnel
    /// that has none).
    pub fn build(spec: &EncapSpec) -> Result<HeaderTemplate> {
        let v6 = match (spec.src, spec.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => false,
            (IpAddr::V6(_), IpAddr::V6(_)) => true,
            _ => {
                return Err(spec_err(
                    "tunnel addresses",
                    "source and destination must both be IPv4 or both IPv6",
                ))
            }
        };
        let key24 = |what: &'static str| -> Result<Vni> {
            let k = spec.key.unwrap_or(0);
            u32::try_from(k)
                .ok()
                .and_then(Vni::new)
                .ok_or_else(|| spec_err(what, "does not fit in 24 bits"))
        };
        if !spec.geneve_options.is_empty() && spec.kind != TunnelKind::Geneve {
            return Err(spec_err("options", "only Geneve carries options"));
        }
        if spec.inner_proto != EtherType::TransEtherBridging
            && !matches!(spec.kind, TunnelKind::Geneve | TunnelKind::Gre)
        {
            return Err(spec_err(
                "inner protocol",
                "only Geneve and GRE carry IP packets directly",
            ));
        }
        let mut t = HeaderTemplate {
            bytes: [0; MAX_OVERHEAD],
            len: 0,
            ip: 0,
            l4: 0,
            kind: spec.kind,
            v6,
            csum: spec.csum,
            src_port_min: spec.src_port_min.min(spec.src_port_max),
            src_port_max: spec.src_port_max.max(spec.src_port_min),
            ip_sum: 0,
            pseudo_sum: 0,
            gre_flow_id: None,
            gre_seq_at: None,
        };
        let b = &mut t.bytes;
        let ip_type = if v6 { EtherType::Ipv6 } else { EtherType::Ipv4 };
        let mut at = ethernet::HEADER_LEN;
        let first_type = if let Some(tci) = spec.outer_vlan {
            put16(b, at, tci.to_u16());
            put16(b, at + 2, ip_type.into());
            at += vlan::TAG_LEN;
            EtherType::Vlan
        } else {
            ip_type
        };
        ethernet::Repr {
            dst: spec.eth_dst,
            src: spec.eth_src,
            ethertype: first_type,
        }
        .emit(b);
        t.ip = at as u8;
        let proto = match spec.kind {
            TunnelKind::Geneve | TunnelKind::Vxlan => IpProtocol::Udp,
            TunnelKind::Gre | TunnelKind::Nvgre => IpProtocol::Gre,
            TunnelKind::Stt => IpProtocol::Tcp,
        };
        match (spec.src, spec.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                ipv4::Repr {
                    src: s,
                    dst: d,
                    protocol: proto,
                    payload_len: 0,
                    tos: spec.tos,
                    ident: 0,
                    dont_frag: spec.dont_frag,
                    ttl: spec.ttl,
                }
                .emit(&mut b[at..]);
                put16(b, at + 2, 0);
                put16(b, at + 10, 0);
                t.ip_sum = checksum::sum(0, &b[at..at + ipv4::HEADER_LEN]);
                t.pseudo_sum = checksum::pseudo_v4(s.octets(), d.octets(), proto.into(), 0);
                at += ipv4::HEADER_LEN;
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                ipv6::Repr {
                    src: s,
                    dst: d,
                    next_header: proto,
                    payload_len: 0,
                    traffic_class: spec.tos,
                    flow_label: 0,
                    hop_limit: spec.ttl,
                }
                .emit(&mut b[at..]);
                t.pseudo_sum = checksum::pseudo_v6(s.octets(), d.octets(), proto.into(), 0);
                at += ipv6::HEADER_LEN;
            }
            _ => unreachable!("families checked above"),
        }
        t.l4 = at as u8;
        match spec.kind {
            TunnelKind::Geneve | TunnelKind::Vxlan => {
                udp::Repr {
                    src_port: 0,
                    dst_port: spec.dst_port,
                    payload_len: 0,
                }
                .emit(&mut b[at..]);
                at += udp::HEADER_LEN;
                if spec.kind == TunnelKind::Geneve {
                    let opts = spec.geneve_options.as_bytes();
                    geneve::Repr {
                        version: 0,
                        oam: false,
                        critical: spec.geneve_options.any_critical(),
                        reserved1: 0,
                        protocol: spec.inner_proto,
                        vni: key24("vni")?,
                        reserved2: 0,
                        options: opts,
                    }
                    .emit(&mut b[at..])?;
                    at += geneve::HEADER_LEN + opts.len();
                } else {
                    vxlan::Repr::new(key24("vni")?).emit(&mut b[at..]);
                    at += vxlan::HEADER_LEN;
                }
            }
            TunnelKind::Gre | TunnelKind::Nvgre => {
                let nvgre = spec.kind == TunnelKind::Nvgre;
                let key = if nvgre {
                    Some(gre::nvgre_key(key24("vsid")?, 0))
                } else {
                    match spec.key {
                        None => None,
                        Some(k) => Some(
                            u32::try_from(k)
                                .map_err(|_| spec_err("key", "does not fit in 32 bits"))?,
                        ),
                    }
                };
                if nvgre && (spec.csum || spec.gre_seq) {
                    return Err(spec_err(
                        "nvgre",
                        "RFC 7637 § 3.2: NVGRE has no checksum or sequence number",
                    ));
                }
                let r = gre::Repr {
                    protocol: spec.inner_proto,
                    checksum: spec.csum,
                    reserved1: 0,
                    key,
                    seq: spec.gre_seq.then_some(0),
                    reserved0: 0,
                    version: 0,
                };
                let n = r.emit(&mut b[at..]);
                let key_at = at + gre::BASE_LEN + if spec.csum { 4 } else { 0 };
                if nvgre {
                    t.gre_flow_id = Some((key_at + 3) as u8);
                }
                if spec.gre_seq {
                    t.gre_seq_at = Some((key_at + if key.is_some() { 4 } else { 0 }) as u8);
                }
                at += n;
            }
            TunnelKind::Stt => {
                tcp::Repr {
                    src_port: 0,
                    dst_port: spec.dst_port,
                    seq: 0,
                    ack: 0,
                    flags: tcp::flags::PSH | tcp::flags::ACK,
                    window: u16::MAX,
                    urgent: 0,
                }
                .emit(&mut b[at..]);
                at += tcp::HEADER_LEN;
                stt::Repr {
                    context_id: spec.key.unwrap_or(0),
                    ..stt::Repr::default()
                }
                .emit(&mut b[at..]);
                at += stt::HEADER_LEN;
            }
        }
        t.len = at as u16;
        Ok(t)
    }

    /// Bytes the outer headers add to a tenant frame.
    pub fn overhead(&self) -> usize {
        self.len as usize
    }

    /// Where an STT checksum left partial (`csum: false`) must be completed:
    /// the checksum starts at the outer TCP header (`csum_start`) and the
    /// field is 16 bytes into it (`csum_offset`), in the pushed frame.
    pub fn stt_csum_offset(&self) -> Option<(usize, usize)> {
        (self.kind == TunnelKind::Stt && !self.csum).then_some((self.l4 as usize, 16))
    }

    /// The outer headers as built (lengths and checksums still zero).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    pub fn kind(&self) -> TunnelKind {
        self.kind
    }

    /// The L2 overhead a tenant frame pays: everything but the outer
    /// Ethernet header (and tag), which the underlay MTU does not count.
    pub fn mtu_overhead(&self) -> usize {
        self.len as usize - self.ip as usize
    }
}

/// Per-packet values for [`push`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushMeta {
    /// The inner flow hash ([`flowhash::hash_frame`]); `None` computes it.
    pub hash: Option<u32>,
    /// GRE sequence number or STT packet ID.
    pub seq: u32,
    /// STT's frame-header flags, L4 offset and MSS for the inner packet's
    /// offloads (zero when the inner checksums are complete).
    pub stt_flags: u8,
    pub stt_l4_offset: u8,
    pub stt_mss: u16,
}

/// Encapsulate the tenant frame in `p` with the outer headers of `t`.
///
/// Per packet this copies the template and patches lengths, the source port
/// and checksums. Outer checksums, when enabled, are computed over the whole
/// packet; that is the one step here whose cost grows with the payload.
pub fn push<B: AsRef<[u8]> + AsMut<[u8]>>(
    t: &HeaderTemplate,
    p: &mut PacketBuf<B>,
    meta: PushMeta,
) -> Result<()> {
    let inner_len = p.len();
    let hash = match meta.hash {
        Some(h) => h,
        None => flowhash::hash_frame(p.data()),
    };
    let n = t.len as usize;
    let ip = t.ip as usize;
    let l4 = t.l4 as usize;
    let l4_len = n - l4 + inner_len;
    let ip_payload_len = l4_len;
    let total = if t.v6 {
        ip_payload_len
    } else {
        ip_payload_len + ipv4::HEADER_LEN
    };
    if total > u16::MAX as usize {
        return Err(Error::new(
            Layer::Buffer,
            0,
            ErrorKind::NoRoom {
                field: "outer length",
                needed: total,
                available: u16::MAX as usize,
            },
        ));
    }
    let d = p.push(n)?;
    d[..n].copy_from_slice(&t.bytes[..n]);
    if t.v6 {
        put16(d, ip + 4, ip_payload_len as u16);
    } else {
        put16(d, ip + 2, total as u16);
        let c = checksum::finish(t.ip_sum + total as u64);
        put16(d, ip + 10, c);
    }
    let sport = flowhash::source_port(hash, t.src_port_min, t.src_port_max);
    match t.kind {
        TunnelKind::Geneve | TunnelKind::Vxlan => {
            put16(d, l4, sport);
            put16(d, l4 + 4, l4_len as u16);
            if t.csum {
                let c = checksum::finish(checksum::sum(t.pseudo_sum + l4_len as u64, &d[l4..]));
                put16(d, l4 + 6, if c == 0 { 0xffff } else { c });
            }
        }
        TunnelKind::Gre | TunnelKind::Nvgre => {
            if let Some(at) = t.gre_flow_id {
                d[at as usize] = hash as u8;
            }
            if let Some(at) = t.gre_seq_at {
                put32(d, at as usize, meta.seq);
            }
            if t.csum {
                gre::fill_checksum(&mut d[l4..]);
            }
        }
        TunnelKind::Stt => {
            let frame_len = stt::HEADER_LEN + inner_len;
            if frame_len > stt::MAX_FRAME {
                return Err(Error::invalid(
                    Layer::Stt,
                    "frame length",
                    0,
                    "tenant frame over 65517 bytes",
                ));
            }
            put16(d, l4, sport);
            put32(d, l4 + 4, stt::seq(frame_len as u16, 0));
            put32(d, l4 + 8, meta.seq);
            let s = l4 + tcp::HEADER_LEN;
            d[s + 1] = meta.stt_flags;
            d[s + 2] = meta.stt_l4_offset;
            put16(d, s + 4, meta.stt_mss);
            if t.csum {
                let c = checksum::finish(checksum::sum(t.pseudo_sum + l4_len as u64, &d[l4..]));
                put16(d, l4 + 16, c);
            } else {
                // Offloaded: the pseudo-header sum, not complemented.
                put16(d, l4 + 16, checksum::fold(t.pseudo_sum + l4_len as u64));
            }
        }
    }
    Ok(())
}

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

/// Decapsulate the frame in `p`: validate the outer headers, fill `meta`
/// (the caller keeps one per batch slot, so nothing large is built or
/// moved per packet) and leave the tenant frame in `p`.
///
/// `known_option` tells which critical Geneve options this receiver
/// understands; a packet with any other critical option is refused with
/// [`ErrorKind::UnknownCriticalOption`]. Errors carry the offset in the
/// outer frame; the buffer is left unchanged on error, `meta` is not.
pub fn pop<B: AsRef<[u8]> + AsMut<[u8]>>(
    p: &mut PacketBuf<B>,
    cfg: &PopConfig,
    known_option: impl Fn(u16, OptType) -> bool,
    meta: &mut TunnelMetadata,
) -> Result<Decap> {
    if let Some(r) = pop_fast(p, cfg, &known_option, meta) {
        return r;
    }
    pop_general(p, cfg, known_option, meta)
}

/// [`pop`] without its fast path: every outer layer through the views.
/// Public so that tests and fuzzing can check that both give the same
/// result on any input.
#[doc(hidden)]
pub fn pop_general<B: AsRef<[u8]> + AsMut<[u8]>>(
    p: &mut PacketBuf<B>,
    cfg: &PopConfig,
    known_option: impl Fn(u16, OptType) -> bool,
    meta: &mut TunnelMetadata,
) -> Result<Decap> {
    let d = p.data();
    let eth = ethernet::Frame::new_checked(d)?;
    let mut et = eth.ethertype();
    let mut at = ethernet::HEADER_LEN;
    let mut outer_vlan = None;
    if et.is_vlan_tpid() {
        let tag = vlan::Tag::new_checked(&d[at..]).map_err(|e| e.at(at))?;
        outer_vlan = Some(tag.tci());
        et = tag.ethertype();
        at += vlan::TAG_LEN;
    }
    let ip_at = at;
    // The pseudo-header sum without its length; UDP/TCP lengths here are
    // under 64 KiB, so adding the length is the same for IPv4 and IPv6.
    let (src, dst, tos, ttl, proto, l4_at, l4_end, pseudo_base);
    match et {
        EtherType::Ipv4 => {
            let ip = ipv4::Packet::new_checked(&d[at..]).map_err(|e| e.at(at))?;
            if ip.more_frags() || ip.frag_offset() != 0 {
                return Err(Error::new(
                    Layer::Ipv4,
                    at + 6,
                    ErrorKind::Unsupported {
                        field: "fragment",
                        value: ip.frag_offset() as u32,
                    },
                ));
            }
            if cfg.verify_csum && !ip.verify_checksum() {
                return Err(Error::new(
                    Layer::Ipv4,
                    at + 10,
                    ErrorKind::Checksum {
                        field: "header checksum",
                    },
                ));
            }
            let (s4, d4) = (ip.src(), ip.dst());
            src = IpAddr::V4(s4);
            dst = IpAddr::V4(d4);
            tos = ip.tos();
            ttl = ip.ttl();
            proto = ip.protocol();
            l4_at = at + ip.header_len();
            l4_end = at + ip.total_len() as usize;
            pseudo_base = checksum::pseudo_v4(s4.octets(), d4.octets(), u8::from(proto), 0);
        }
        EtherType::Ipv6 => {
            let ip = ipv6::Packet::new_checked(&d[at..]).map_err(|e| e.at(at))?;
            let (s6, d6) = (ip.src(), ip.dst());
            src = IpAddr::V6(s6);
            dst = IpAddr::V6(d6);
            tos = ip.traffic_class();
            ttl = ip.hop_limit();
            proto = ip.next_header();
            l4_at = at + ipv6::HEADER_LEN;
            l4_end = l4_at + ip.payload_len() as usize;
            pseudo_base = checksum::pseudo_v6(s6.octets(), d6.octets(), u8::from(proto), 0);
        }
        other => {
            return Err(Error::new(
                Layer::Ethernet,
                at - 2,
                ErrorKind::Unsupported {
                    field: "underlay ethertype",
                    value: u16::from(other) as u32,
                },
            ))
        }
    }
    let l4b = &d[l4_at..l4_end];
    meta.begin(TunnelKind::Vxlan, src, dst, 0, 0);
    meta.tos = tos;
    meta.ttl = ttl;
    meta.outer_vlan = outer_vlan;
    let inner_at;
    // Where the tunnel payload ends: the outer IP packet's end, or for UDP
    // the datagram's end (bytes after it are not part of the tenant frame).
    let mut end = l4_end;
    match proto {
        IpProtocol::Udp => {
            let u = udp::Packet::new_checked(l4b).map_err(|e| e.at(l4_at))?;
            end = l4_at + u.len() as usize;
            meta.src_port = u.src_port();
            meta.dst_port = u.dst_port();
            meta.csum = u.checksum() != 0;
            if cfg.verify_csum && meta.csum && !u.verify_checksum(pseudo_base + u.len() as u64) {
                return Err(Error::new(
                    Layer::Udp,
                    l4_at + 6,
                    ErrorKind::Checksum { field: "checksum" },
                ));
            }
            let t_at = l4_at + udp::HEADER_LEN;
            let tb = u.payload();
            if meta.dst_port == cfg.geneve_port {
                // Tiling and critical options checked in one pass.
                let g =
                    geneve::Packet::new_checked_known(tb, &known_option).map_err(|e| e.at(t_at))?;
                if g.version() != 0 {
                    return Err(Error::invalid(
                        Layer::Geneve,
                        "version",
                        t_at,
                        "must be 0 (RFC 8926 § 3.4)",
                    ));
                }
                meta.kind = TunnelKind::Geneve;
                meta.tun_id = g.vni().get() as u64;
                meta.oam = g.oam();
                meta.inner_proto = g.protocol();
                meta.options
                    .set(g.options_bytes())
                    .map_err(|e| e.at(t_at + 8))?;
                inner_at = t_at + g.header_len();
            } else if meta.dst_port == cfg.vxlan_port {
                let v = vxlan::Packet::new_checked(tb).map_err(|e| e.at(t_at))?;
                v.check().map_err(|e| e.at(t_at))?;
                meta.kind = TunnelKind::Vxlan;
                meta.tun_id = v.vni().get() as u64;
                inner_at = t_at + vxlan::HEADER_LEN;
            } else {
                return Err(Error::new(
                    Layer::Udp,
                    l4_at + 2,
                    ErrorKind::Unsupported {
                        field: "destination port (no tunnel listens there)",
                        value: meta.dst_port as u32,
                    },
                ));
            }
        }
        IpProtocol::Gre => {
            let g = gre::Packet::new_checked(l4b).map_err(|e| e.at(l4_at))?;
            if cfg.verify_csum {
                g.check().map_err(|e| e.at(l4_at))?;
            } else if g.version() != 0 {
                return Err(Error::invalid(
                    Layer::Gre,
                    "version",
                    l4_at + 1,
                    "must be 0",
                ));
            }
            meta.csum = g.has_checksum();
            meta.inner_proto = g.protocol();
            if cfg.gre_as_nvgre && gre::is_nvgre(&g) {
                let (vsid, flow) = gre::nvgre_split(g.key().unwrap_or(0));
                meta.kind = TunnelKind::Nvgre;
                meta.tun_id = vsid.get() as u64;
                meta.flow_id = flow;
            } else {
                meta.kind = TunnelKind::Gre;
                meta.key_present = g.has_key();
                meta.tun_id = g.key().unwrap_or(0) as u64;
            }
            inner_at = l4_at + g.header_len();
        }
        IpProtocol::Tcp => {
            let t = tcp::Packet::new_checked(l4b).map_err(|e| e.at(l4_at))?;
            if t.dst_port() != cfg.stt_port {
                return Err(Error::new(
                    Layer::Tcp,
                    l4_at + 2,
                    ErrorKind::Unsupported {
                        field: "destination port (no tunnel listens there)",
                        value: t.dst_port() as u32,
                    },
                ));
            }
            if cfg.verify_csum && !t.verify_checksum(pseudo_base + l4b.len() as u64) {
                return Err(Error::new(
                    Layer::Tcp,
                    l4_at + 16,
                    ErrorKind::Checksum { field: "checksum" },
                ));
            }
            meta.kind = TunnelKind::Stt;
            meta.src_port = t.src_port();
            meta.dst_port = t.dst_port();
            meta.csum = true;
            let seg_at = l4_at + t.header_len();
            let seg_len = t.payload().len();
            let (frame_len, offset) = stt::split_seq(t.seq());
            if offset != 0 || seg_len != frame_len as usize {
                let key = stt::FrameKey {
                    src,
                    dst,
                    src_port: t.src_port(),
                    packet_id: t.ack(),
                };
                let seq = t.seq();
                p.truncate(l4_end);
                p.pull(seg_at)?;
                return Ok(Decap::SttSegment { key, seq });
            }
            let hl = stt_frame(t.payload(), meta).map_err(|e| e.at(seg_at))?;
            inner_at = seg_at + hl;
        }
        other => {
            return Err(Error::new(
                Layer::Ipv4,
                ip_at + 9,
                ErrorKind::Unsupported {
                    field: "underlay protocol",
                    value: u8::from(other) as u32,
                },
            ))
        }
    }
    // Drop Ethernet padding (and bytes past the UDP datagram), then the
    // outer headers.
    p.truncate(end);
    p.pull(inner_at)?;
    Ok(Decap::Frame)
}

/// Write the tunnel header alone (what follows the UDP header) for a tunnel
/// sent through a UDP socket, where the kernel builds IP and UDP: Geneve
/// with `options` (C bit set if any is critical) or VXLAN. Returns its
/// length.
pub fn udp_tunnel_header(
    kind: TunnelKind,
    vni: Vni,
    options: &[u8],
    out: &mut [u8],
) -> Result<usize> {
    match kind {
        TunnelKind::Geneve => {
            let critical = geneve::Options::new(options).any(|o| o.opt_type().critical());
            let r = geneve::Repr {
                version: 0,
                oam: false,
                critical,
                reserved1: 0,
                protocol: EtherType::TransEtherBridging,
                vni,
                reserved2: 0,
                options,
            };
            r.emit(out)?;
            Ok(r.buffer_len())
        }
        TunnelKind::Vxlan => {
            crate::error::need(Layer::Vxlan, "header", out, 0, vxlan::HEADER_LEN)?;
            vxlan::Repr::new(vni).emit(out);
            Ok(vxlan::HEADER_LEN)
        }
        _ => Err(Error::invalid(
            Layer::Tunnel,
            "kind",
            0,
            "only Geneve and VXLAN ride on UDP sockets",
        )),
    }
}

/// Decapsulate a UDP payload as a socket delivers it (Geneve or VXLAN
/// header, then the tenant frame), filling `meta` from the header and the
/// outer addresses the socket reported. Returns where the tenant frame
/// starts. Same checks as [`pop`]: version, I flag, tiling, critical
/// options.
pub fn pop_udp_payload(
    kind: TunnelKind,
    payload: &[u8],
    src: std::net::SocketAddr,
    dst: std::net::SocketAddr,
    known_option: impl Fn(u16, OptType) -> bool,
    meta: &mut TunnelMetadata,
) -> Result<usize> {
    meta.begin(kind, src.ip(), dst.ip(), src.port(), dst.port());
    match kind {
        TunnelKind::Geneve => {
            let g = geneve::Packet::new_checked_known(payload, &known_option)?;
            if g.version() != 0 {
                return Err(Error::invalid(
                    Layer::Geneve,
                    "version",
                    0,
                    "must be 0 (RFC 8926 § 3.4)",
                ));
            }
            meta.tun_id = g.vni().get() as u64;
            meta.oam = g.oam();
            meta.inner_proto = g.protocol();
            meta.options.set(g.options_bytes()).map_err(|e| e.at(8))?;
            Ok(g.header_len())
        }
        TunnelKind::Vxlan => {
            let v = vxlan::Packet::new_checked(payload)?;
            v.check()?;
            meta.tun_id = v.vni().get() as u64;
            Ok(vxlan::HEADER_LEN)
        }
        _ => Err(Error::invalid(
            Layer::Tunnel,
            "kind",
            0,
            "only Geneve and VXLAN ride on UDP sockets",
        )),
    }
}

/// Write a GRE (or NVGRE) header for a tunnel whose outer IP header the
/// kernel builds (a raw IP socket): Ethernet payload (0x6558), the key if
/// any (NVGRE: VSID and the flow hash as FlowID), a checksum field if asked
/// (fill it with [`gre::fill_checksum`] once the frame follows). Returns
/// its length.
pub fn gre_header(
    nvgre: bool,
    key: Option<u32>,
    csum: bool,
    flow_id: u8,
    out: &mut [u8],
) -> Result<usize> {
    crate::error::need(Layer::Gre, "header", out, 0, gre::MAX_HEADER_LEN)?;
    let key = if nvgre {
        Some(gre::nvgre_key(Vni::from_masked(key.unwrap_or(0)), flow_id))
    } else {
        key
    };
    let r = gre::Repr {
        protocol: EtherType::TransEtherBridging,
        checksum: csum && !nvgre,
        reserved1: 0,
        key,
        seq: None,
        reserved0: 0,
        version: 0,
    };
    Ok(r.emit(out))
}

/// One STT segment's outer TCP header, for a raw IP socket that adds the
/// IP header itself: ports, the sequence field holding the STT frame's
/// length and this segment's offset (§ 3.2), the frame's packet ID in the
/// acknowledgement field (the same in every segment of a frame), PSH+ACK,
/// and the checksum over this header and `payload` (the segment's part of
/// the STT frame) under the pseudo-header of `src` and `dst`.
#[allow(clippy::too_many_arguments)]
pub fn stt_segment_header(
    src: IpAddr,
    dst: IpAddr,
    src_port: u16,
    dst_port: u16,
    frame_len: usize,
    offset: usize,
    packet_id: u32,
    payload: &[u8],
) -> Result<[u8; tcp::HEADER_LEN]> {
    if frame_len > stt::MAX_FRAME || offset + payload.len() > frame_len {
        return Err(Error::invalid(
            Layer::Stt,
            "frame length",
            0,
            "segment past the frame, or frame over 65535 bytes",
        ));
    }
    let mut h = [0u8; tcp::HEADER_LEN];
    tcp::Repr {
        src_port,
        dst_port,
        seq: stt::seq(frame_len as u16, offset as u16),
        ack: packet_id,
        flags: tcp::flags::PSH | tcp::flags::ACK,
        window: u16::MAX,
        urgent: 0,
    }
    .emit(&mut h);
    let len = tcp::HEADER_LEN + payload.len();
    let pseudo = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            checksum::pseudo_v4(s.octets(), d.octets(), 6, len as u16)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            checksum::pseudo_v6(s.octets(), d.octets(), 6, len as u32)
        }
        _ => {
            return Err(Error::invalid(
                Layer::Tcp,
                "addresses",
                0,
                "source and destination of different IP families",
            ))
        }
    };
    let c = checksum::finish(checksum::sum(checksum::sum(pseudo, &h), payload));
    put16(&mut h, 16, c);
    Ok(h)
}

/// Decapsulate a whole IPv4 packet carrying GRE (as a raw socket delivers
/// it): fill `meta` and return where the tenant frame starts. NVGRE's key
/// is read as VSID and FlowID when `nvgre` (the receiving port says so).
pub fn pop_gre_ipv4(
    packet: &[u8],
    nvgre: bool,
    verify_csum: bool,
    meta: &mut TunnelMetadata,
) -> Result<usize> {
    let ip = ipv4::Packet::new_checked(packet)?;
    if ip.protocol() != IpProtocol::Gre {
        return Err(Error::new(
            Layer::Ipv4,
            9,
            ErrorKind::Unsupported {
                field: "protocol",
                value: u8::from(ip.protocol()) as u32,
            },
        ));
    }
    if ip.more_frags() || ip.frag_offset() != 0 {
        return Err(Error::new(
            Layer::Ipv4,
            6,
            ErrorKind::Unsupported {
                field: "fragment",
                value: ip.frag_offset() as u32,
            },
        ));
    }
    let at = ip.header_len();
    let g = gre::Packet::new_checked(ip.payload()).map_err(|e| e.at(at))?;
    if verify_csum {
        g.check().map_err(|e| e.at(at))?;
    } else if g.version() != 0 {
        return Err(Error::invalid(Layer::Gre, "version", at + 1, "must be 0"));
    }
    if g.protocol() != EtherType::TransEtherBridging {
        return Err(Error::new(
            Layer::Gre,
            at + 2,
            ErrorKind::Unsupported {
                field: "protocol (tunlab's GRE ports carry Ethernet)",
                value: u16::from(g.protocol()) as u32,
            },
        ));
    }
    *meta = TunnelMetadata {
        kind: if nvgre {
            TunnelKind::Nvgre
        } else {
            TunnelKind::Gre
        },
        src: IpAddr::V4(ip.src()),
        dst: IpAddr::V4(ip.dst()),
        tos: ip.tos(),
        ttl: ip.ttl(),
        key_present: g.has_key(),
        csum: g.has_checksum(),
        ..TunnelMetadata::default()
    };
    if nvgre {
        let (vsid, flow) = gre::nvgre_split(g.key().unwrap_or(0));
        meta.tun_id = vsid.get() as u64;
        meta.flow_id = flow;
    } else {
        meta.tun_id = g.key().unwrap_or(0) as u64;
    }
    Ok(at + g.header_len())
}

/// Offsets in the fast path: untagged Ethernet, then IPv4 without options.
const FAST_IP: usize = ethernet::HEADER_LEN;
const FAST_L4: usize = FAST_IP + ipv4::HEADER_LEN;

/// The outer IPv4 header as the fast path has checked it once, for every
/// tunnel protocol: where the packet ends, the addresses, TOS and TTL.
#[derive(Clone, Copy)]
struct Outer4 {
    end: usize,
    src: [u8; 4],
    dst: [u8; 4],
    tos: u8,
    ttl: u8,
}

impl Outer4 {
    /// The pseudo-header sum for `proto` over `len` bytes of L4.
    #[inline]
    fn pseudo(&self, proto: u8, len: usize) -> u64 {
        checksum::pseudo_v4(self.src, self.dst, proto, len as u16)
    }

    /// Start the metadata slot with what the outer IPv4 header gives.
    #[inline]
    fn begin(&self, meta: &mut TunnelMetadata, kind: TunnelKind, src_port: u16, dst_port: u16) {
        meta.begin(
            kind,
            IpAddr::V4(self.src.into()),
            IpAddr::V4(self.dst.into()),
            src_port,
            dst_port,
        );
        meta.tos = self.tos;
        meta.ttl = self.ttl;
    }
}

/// The common cases of [`pop`], with fixed offsets: untagged Ethernet,
/// IPv4 without options or fragmentation, then UDP to the Geneve or VXLAN
/// port, GRE/NVGRE, or a whole STT frame. Returns `None` for anything else
/// (the general path then runs, and reports any error), and never accepts
/// what the general path would refuse: a differential property test and
/// the `tunnel_pop` fuzz target hold the two to the same results.
#[inline]
fn pop_fast<B: AsRef<[u8]> + AsMut<[u8]>>(
    p: &mut PacketBuf<B>,
    cfg: &PopConfig,
    known_option: &impl Fn(u16, OptType) -> bool,
    meta: &mut TunnelMetadata,
) -> Option<Result<Decap>> {
    const IP: usize = FAST_IP;
    let d = p.data();
    if d.len() < FAST_L4 || d[12] != 0x08 || d[13] != 0x00 || d[IP] != 0x45 {
        return None;
    }
    let total = be16(d, IP + 2) as usize;
    if be16(d, IP + 6) & 0x3fff != 0 || total < ipv4::HEADER_LEN || IP + total > d.len() {
        return None;
    }
    if cfg.verify_csum && !checksum::verify(&d[IP..FAST_L4]) {
        return None;
    }
    let o = Outer4 {
        end: IP + total,
        src: [d[IP + 12], d[IP + 13], d[IP + 14], d[IP + 15]],
        dst: [d[IP + 16], d[IP + 17], d[IP + 18], d[IP + 19]],
        tos: d[IP + 1],
        ttl: d[IP + 8],
    };
    match d[IP + 9] {
        17 => pop_fast_udp4(p, cfg, known_option, meta, o),
        47 => pop_fast_gre4(p, cfg, meta, o),
        6 => pop_fast_stt4(p, cfg, meta, o),
        _ => None,
    }
}

/// UDP to the Geneve or VXLAN port.
#[inline]
fn pop_fast_udp4<B: AsRef<[u8]> + AsMut<[u8]>>(
    p: &mut PacketBuf<B>,
    cfg: &PopConfig,
    known_option: &impl Fn(u16, OptType) -> bool,
    meta: &mut TunnelMetadata,
    o: Outer4,
) -> Option<Result<Decap>> {
    const L4: usize = FAST_L4;
    const T: usize = L4 + udp::HEADER_LEN;
    let d = p.data();
    if o.end < T {
        return None;
    }
    let ulen = be16(d, L4 + 4) as usize;
    if ulen < udp::HEADER_LEN || L4 + ulen > o.end {
        return None;
    }
    let dport = be16(d, L4 + 2);
    let kind = if dport == cfg.geneve_port {
        TunnelKind::Geneve
    } else if dport == cfg.vxlan_port {
        TunnelKind::Vxlan
    } else {
        return None;
    };
    let csum = be16(d, L4 + 6);
    if cfg.verify_csum
        && csum != 0
        && checksum::fold(checksum::sum(o.pseudo(17, ulen), &d[L4..L4 + ulen])) != 0xffff
    {
        return None;
    }
    o.begin(meta, kind, be16(d, L4), dport);
    meta.csum = csum != 0;
    let tb = &d[T..L4 + ulen];
    let inner = match kind {
        TunnelKind::Vxlan => {
            if tb.len() < vxlan::HEADER_LEN || tb[0] & vxlan::FLAG_I == 0 {
                return None;
            }
            meta.tun_id = (crate::be32(tb, 4) >> 8) as u64;
            T + vxlan::HEADER_LEN
        }
        _ => {
            let g = match geneve::Packet::new_checked_known(tb, known_option) {
                Ok(g) if g.version() == 0 => g,
                _ => return None,
            };
            meta.tun_id = g.vni().get() as u64;
            meta.oam = g.oam();
            meta.inner_proto = g.protocol();
            // The view checked that the options area is there and tiles.
            let hl = geneve::HEADER_LEN + ((tb[0] & 0x3f) as usize) * 4;
            if meta.options.set(&tb[geneve::HEADER_LEN..hl]).is_err() {
                return None;
            }
            T + hl
        }
    };
    p.truncate(L4 + ulen);
    Some(p.pull(inner).map(|_| Decap::Frame))
}

/// GRE and NVGRE: the same checks as the general path (version always;
/// reserved bits and the checksum when verifying).
#[inline]
fn pop_fast_gre4<B: AsRef<[u8]> + AsMut<[u8]>>(
    p: &mut PacketBuf<B>,
    cfg: &PopConfig,
    meta: &mut TunnelMetadata,
    o: Outer4,
) -> Option<Result<Decap>> {
    const G: usize = FAST_L4;
    let d = p.data();
    if o.end < G + gre::BASE_LEN {
        return None;
    }
    let tb = &d[G..o.end];
    let flags = be16(tb, 0);
    let (c, k, sq) = (
        flags & gre::FLAG_C != 0,
        flags & gre::FLAG_K != 0,
        flags & gre::FLAG_S != 0,
    );
    let hl = gre::BASE_LEN + 4 * (c as usize + k as usize + sq as usize);
    if tb.len() < hl || flags & gre::VERSION_MASK != 0 {
        return None;
    }
    if cfg.verify_csum && (flags & (gre::FLAG_R | 0x0c00) != 0 || (c && !checksum::verify(tb))) {
        return None;
    }
    let proto = be16(tb, 2);
    let key = k.then(|| crate::be32(tb, gre::BASE_LEN + if c { 4 } else { 0 }));
    let nvgre = cfg.gre_as_nvgre && k && !c && !sq && proto == 0x6558;
    o.begin(
        meta,
        if nvgre {
            TunnelKind::Nvgre
        } else {
            TunnelKind::Gre
        },
        0,
        0,
    );
    meta.csum = c;
    meta.inner_proto = proto.into();
    if nvgre {
        let (vsid, flow) = gre::nvgre_split(key.unwrap_or(0));
        meta.tun_id = vsid.get() as u64;
        meta.flow_id = flow;
    } else {
        meta.key_present = k;
        meta.tun_id = key.unwrap_or(0) as u64;
    }
    p.truncate(o.end);
    Some(p.pull(G + hl).map(|_| Decap::Frame))
}

/// A whole (unsegmented) STT frame behind a TCP header without options;
/// segments and anything unusual take the general path.
#[inline]
fn pop_fast_stt4<B: AsRef<[u8]> + AsMut<[u8]>>(
    p: &mut PacketBuf<B>,
    cfg: &PopConfig,
    meta: &mut TunnelMetadata,
    o: Outer4,
) -> Option<Result<Decap>> {
    const L4: usize = FAST_L4;
    const S: usize = L4 + tcp::HEADER_LEN;
    let d = p.data();
    if o.end < S + stt::HEADER_LEN || d[L4 + 12] >> 4 != 5 || be16(d, L4 + 2) != cfg.stt_port {
        return None;
    }
    let (frame_len, offset) = stt::split_seq(crate::be32(d, L4 + 4));
    if offset != 0 || o.end - S != frame_len as usize || d[S] != stt::VERSION {
        return None;
    }
    if cfg.verify_csum
        && checksum::fold(checksum::sum(o.pseudo(6, o.end - L4), &d[L4..o.end])) != 0xffff
    {
        return None;
    }
    o.begin(meta, TunnelKind::Stt, be16(d, L4), be16(d, L4 + 2));
    meta.csum = true;
    meta.tun_id = ((crate::be32(d, S + 8) as u64) << 32) | crate::be32(d, S + 12) as u64;
    let tci = be16(d, S + 6);
    if tci & 0x1000 != 0 {
        meta.outer_vlan = Some(Tci::from_u16(tci & 0xefff));
    }
    p.truncate(o.end);
    Some(p.pull(S + stt::HEADER_LEN).map(|_| Decap::Frame))
}

/// Read a whole (reassembled) STT frame's header into `meta`; returns the
/// header length, after which the tenant frame starts.
pub fn stt_frame(frame: &[u8], meta: &mut TunnelMetadata) -> Result<usize> {
    let s = stt::Packet::new_checked(frame)?;
    s.check()?;
    meta.tun_id = s.context_id();
    if s.vlan_valid() {
        // STT carries the tenant's tag out of band; keep it beside the frame.
        meta.outer_vlan = Some(Tci::from_u16(be16(frame, 6) & 0xefff));
    }
    Ok(stt::HEADER_LEN)
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

/// Check that `p` has the headroom the outer headers of `t` need.
pub fn check_headroom<B: AsRef<[u8]>>(p: &PacketBuf<B>, t: &HeaderTemplate) -> Result<()> {
    if p.headroom() < t.overhead() {
        return Err(Error::new(
            Layer::Buffer,
            0,
            ErrorKind::NoRoom {
                field: "headroom",
                needed: t.overhead(),
                available: p.headroom(),
            },
        ));
    }
    Ok(())
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
