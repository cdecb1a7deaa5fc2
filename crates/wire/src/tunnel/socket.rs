//! The tunnel header alone, for tunnels sent through the kernel's UDP,
//! raw IP and raw TCP sockets (the kernel builds the outer IP and UDP).

use super::*;

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
