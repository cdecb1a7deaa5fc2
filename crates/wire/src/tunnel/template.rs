//! build and push: the outer header stack written once per tunnel, copied
//! in front of each frame with only what varies patched.

use super::*;

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
        let at = t.emit_ip(spec, at);
        t.l4 = at as u8;
        let at = t.emit_tunnel(spec, at)?;
        t.len = at as u16;
        Ok(t)
    }

    /// The outer IP header at `at`, its checksum's and the pseudo
    /// header's sums kept for each packet; where the next header goes.
    fn emit_ip(&mut self, spec: &EncapSpec, mut at: usize) -> usize {
        let t = self;
        let b = &mut t.bytes;
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
            // Mixed families are refused before this is called.
            _ => {}
        }
        at
    }

    /// The tunnel's own headers at `at` (UDP and Geneve or VXLAN, GRE,
    /// TCP and STT); where the inner frame goes.
    fn emit_tunnel(&mut self, spec: &EncapSpec, mut at: usize) -> Result<usize> {
        let key24 = |what: &'static str| -> Result<Vni> {
            let k = spec.key.unwrap_or(0);
            u32::try_from(k)
                .ok()
                .and_then(Vni::new)
                .ok_or_else(|| spec_err(what, "does not fit in 24 bits"))
        };
        let t = self;
        let b = &mut t.bytes;
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
        Ok(at)
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
