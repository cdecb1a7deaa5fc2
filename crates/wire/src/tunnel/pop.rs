//! pop: every outer layer validated in one pass, the metadata filled in,
//! the headers stripped; a fast path for the common IPv4 cases.

use super::*;

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
    let o = OuterIp::read(d, cfg)?;
    let l4b = &d[o.l4_at..o.l4_end];
    meta.begin(TunnelKind::Vxlan, o.src, o.dst, 0, 0);
    meta.tos = o.tos;
    meta.ttl = o.ttl;
    meta.outer_vlan = o.outer_vlan;
    // Where the tunnel payload ends: the outer IP packet's end, or for UDP
    // the datagram's end (bytes after it are not part of the tenant frame).
    let (inner_at, end) = match o.proto {
        IpProtocol::Udp => pop_udp_tunnel(l4b, &o, cfg, &known_option, meta)?,
        IpProtocol::Gre => (pop_gre_tunnel(l4b, o.l4_at, cfg, meta)?, o.l4_end),
        IpProtocol::Tcp => match pop_stt_tunnel(l4b, &o, cfg, meta)? {
            Stt::Frame(inner_at) => (inner_at, o.l4_end),
            Stt::Segment { key, seq, at } => {
                p.truncate(o.l4_end);
                p.pull(at)?;
                return Ok(Decap::SttSegment { key, seq });
            }
        },
        other => {
            return Err(Error::new(
                Layer::Ipv4,
                o.ip_at + 9,
                ErrorKind::Unsupported {
                    field: "underlay protocol",
                    value: u8::from(other) as u32,
                },
            ))
        }
    };
    // Drop Ethernet padding (and bytes past the UDP datagram), then the
    // outer headers.
    p.truncate(end);
    p.pull(inner_at)?;
    Ok(Decap::Frame)
}

/// The outer Ethernet (with its VLAN tag, if any) and IP headers of a
/// tunnelled packet, read and checked.
struct OuterIp {
    outer_vlan: Option<vlan::Tci>,
    ip_at: usize,
    src: IpAddr,
    dst: IpAddr,
    tos: u8,
    ttl: u8,
    proto: IpProtocol,
    /// Where the transport header starts and the IP packet ends.
    l4_at: usize,
    l4_end: usize,
    /// The pseudo-header sum without its length; UDP/TCP lengths here are
    /// under 64 KiB, so adding the length is the same for IPv4 and IPv6.
    pseudo_base: u64,
}

impl OuterIp {
    fn read(d: &[u8], cfg: &PopConfig) -> Result<OuterIp> {
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
                let proto = ip.protocol();
                Ok(OuterIp {
                    outer_vlan,
                    ip_at: at,
                    src: IpAddr::V4(s4),
                    dst: IpAddr::V4(d4),
                    tos: ip.tos(),
                    ttl: ip.ttl(),
                    proto,
                    l4_at: at + ip.header_len(),
                    l4_end: at + ip.total_len() as usize,
                    pseudo_base: checksum::pseudo_v4(s4.octets(), d4.octets(), u8::from(proto), 0),
                })
            }
            EtherType::Ipv6 => {
                let ip = ipv6::Packet::new_checked(&d[at..]).map_err(|e| e.at(at))?;
                let (s6, d6) = (ip.src(), ip.dst());
                let proto = ip.next_header();
                Ok(OuterIp {
                    outer_vlan,
                    ip_at: at,
                    src: IpAddr::V6(s6),
                    dst: IpAddr::V6(d6),
                    tos: ip.traffic_class(),
                    ttl: ip.hop_limit(),
                    proto,
                    l4_at: at + ipv6::HEADER_LEN,
                    l4_end: at + ipv6::HEADER_LEN + ip.payload_len() as usize,
                    pseudo_base: checksum::pseudo_v6(s6.octets(), d6.octets(), u8::from(proto), 0),
                })
            }
            other => Err(Error::new(
                Layer::Ethernet,
                at - 2,
                ErrorKind::Unsupported {
                    field: "underlay ethertype",
                    value: u16::from(other) as u32,
                },
            )),
        }
    }
}

/// Geneve or VXLAN in UDP datagram `l4b`: the metadata filled in; where
/// the inner frame starts and the datagram ends.
fn pop_udp_tunnel(
    l4b: &[u8],
    o: &OuterIp,
    cfg: &PopConfig,
    known_option: &impl Fn(u16, OptType) -> bool,
    meta: &mut TunnelMetadata,
) -> Result<(usize, usize)> {
    let l4_at = o.l4_at;
    let u = udp::Packet::new_checked(l4b).map_err(|e| e.at(l4_at))?;
    let end = l4_at + u.len() as usize;
    meta.src_port = u.src_port();
    meta.dst_port = u.dst_port();
    meta.csum = u.checksum() != 0;
    if cfg.verify_csum && meta.csum && !u.verify_checksum(o.pseudo_base + u.len() as u64) {
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
        let g = geneve::Packet::new_checked_known(tb, known_option).map_err(|e| e.at(t_at))?;
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
        Ok((t_at + g.header_len(), end))
    } else if meta.dst_port == cfg.vxlan_port {
        let v = vxlan::Packet::new_checked(tb).map_err(|e| e.at(t_at))?;
        v.check().map_err(|e| e.at(t_at))?;
        meta.kind = TunnelKind::Vxlan;
        meta.tun_id = v.vni().get() as u64;
        Ok((t_at + vxlan::HEADER_LEN, end))
    } else {
        Err(Error::new(
            Layer::Udp,
            l4_at + 2,
            ErrorKind::Unsupported {
                field: "destination port (no tunnel listens there)",
                value: meta.dst_port as u32,
            },
        ))
    }
}

/// GRE or NVGRE header `l4b`: the metadata filled in; where the inner
/// frame starts.
fn pop_gre_tunnel(
    l4b: &[u8],
    l4_at: usize,
    cfg: &PopConfig,
    meta: &mut TunnelMetadata,
) -> Result<usize> {
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
    Ok(l4_at + g.header_len())
}

/// What an STT segment is: a whole frame (where it starts), or one
/// segment of a frame to reassemble (its key, sequence and where its
/// payload starts).
enum Stt {
    Frame(usize),
    Segment {
        key: stt::FrameKey,
        seq: u32,
        at: usize,
    },
}

/// STT in TCP segment `l4b`: the metadata filled in.
fn pop_stt_tunnel(
    l4b: &[u8],
    o: &OuterIp,
    cfg: &PopConfig,
    meta: &mut TunnelMetadata,
) -> Result<Stt> {
    let l4_at = o.l4_at;
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
    if cfg.verify_csum && !t.verify_checksum(o.pseudo_base + l4b.len() as u64) {
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
            src: o.src,
            dst: o.dst,
            src_port: t.src_port(),
            packet_id: t.ack(),
        };
        return Ok(Stt::Segment {
            key,
            seq: t.seq(),
            at: seg_at,
        });
    }
    let hl = stt_frame(t.payload(), meta).map_err(|e| e.at(seg_at))?;
    Ok(Stt::Frame(seg_at + hl))
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
