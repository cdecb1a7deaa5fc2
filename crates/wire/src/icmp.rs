//! ICMP (RFC 792) and ICMPv6 (RFC 4443): the common header, and the two
//! messages a tunnel endpoint must send for path-MTU discovery: IPv4
//! "fragmentation needed" (RFC 1191 § 4) and ICMPv6 "packet too big"
//! (RFC 4443 § 3.2).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |     Code      |          Checksum             |
//! |                    Rest of header (type-specific)             |
//! |        Data (for errors: as much of the offending packet       |
//! |        as fits)                                                |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::checksum;
use crate::error::{need, Error, ErrorKind, Layer, Result};
use crate::{be16, be32, put16, put32};

pub const HEADER_LEN: usize = 8;

/// ICMPv4 types and codes used here.
pub const V4_ECHO_REPLY: u8 = 0;
pub const V4_DEST_UNREACHABLE: u8 = 3;
pub const V4_CODE_FRAG_NEEDED: u8 = 4;
pub const V4_ECHO_REQUEST: u8 = 8;
/// ICMPv6 types used here.
pub const V6_PACKET_TOO_BIG: u8 = 2;
pub const V6_ECHO_REQUEST: u8 = 128;
pub const V6_ECHO_REPLY: u8 = 129;

/// How much of the offending packet an ICMPv4 error quotes: RFC 1812
/// § 4.3.2.3 allows up to 576 bytes in all; 548 leaves room for the outer
/// IPv4 (20) and ICMP (8) headers.
pub const V4_QUOTE_MAX: usize = 548;
/// ICMPv6 errors must fit the minimum MTU of 1280 (RFC 4443 § 2.4 (c)).
pub const V6_QUOTE_MAX: usize = 1280 - 40 - 8;

/// A zero-copy view of an ICMP or ICMPv6 message (the formats share a header).
#[derive(Debug, Clone)]
pub struct Packet<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    #[inline]
    pub fn new_checked(buf: T) -> Result<Packet<T>> {
        need(Layer::Icmp, "header", buf.as_ref(), 0, HEADER_LEN)?;
        Ok(Packet { buf })
    }
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.b()[0]
    }
    #[inline]
    pub fn code(&self) -> u8 {
        self.b()[1]
    }
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 2)
    }
    /// The four type-specific bytes after the checksum.
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        be32(self.b(), 4)
    }
    /// Echo identifier (echo request/reply only).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        be16(self.b(), 4)
    }
    /// Echo sequence number (echo request/reply only).
    #[inline]
    pub fn echo_seq(&self) -> u16 {
        be16(self.b(), 6)
    }
    /// Next-hop MTU of an IPv4 fragmentation-needed message (RFC 1191 § 4).
    #[inline]
    pub fn v4_next_hop_mtu(&self) -> u16 {
        be16(self.b(), 6)
    }
    /// MTU of an ICMPv6 packet-too-big message.
    #[inline]
    pub fn v6_mtu(&self) -> u32 {
        be32(self.b(), 4)
    }
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }
    /// ICMPv4: the checksum covers the message only.
    #[inline]
    pub fn verify_checksum_v4(&self) -> bool {
        checksum::verify(self.b())
    }
    /// ICMPv6: the checksum also covers a pseudo-header.
    #[inline]
    pub fn verify_checksum_v6(&self, pseudo: u64) -> bool {
        checksum::fold(checksum::sum(pseudo, self.b())) == 0xffff
    }
}

/// Write an ICMPv4 "fragmentation needed and DF set" message quoting
/// `offending` (an IPv4 packet, from its header) into `out`; returns the ICMP
/// message length. The caller wraps it in an IPv4 header back to the sender.
#[inline]
pub fn emit_frag_needed(offending: &[u8], next_hop_mtu: u16, out: &mut [u8]) -> Result<usize> {
    let quote = offending.len().min(V4_QUOTE_MAX);
    let len = HEADER_LEN + quote;
    if out.len() < len {
        return Err(no_room(Layer::Icmp, len, out.len()));
    }
    out[0] = V4_DEST_UNREACHABLE;
    out[1] = V4_CODE_FRAG_NEEDED;
    put16(out, 2, 0);
    put16(out, 4, 0);
    put16(out, 6, next_hop_mtu);
    out[HEADER_LEN..len].copy_from_slice(&offending[..quote]);
    let c = checksum::checksum(&out[..len]);
    put16(out, 2, c);
    Ok(len)
}

/// Write an ICMPv6 "packet too big" message quoting `offending` (an IPv6
/// packet) into `out`; `pseudo` is the pseudo-header sum for the message's
/// own IPv6 header with the length of this message, which the caller computes
/// with [`checksum::pseudo_v6`] and [`ptb_len`].
#[inline]
pub fn emit_packet_too_big(
    offending: &[u8],
    mtu: u32,
    pseudo: u64,
    out: &mut [u8],
) -> Result<usize> {
    let len = ptb_len(offending.len());
    if out.len() < len {
        return Err(no_room(Layer::Icmpv6, len, out.len()));
    }
    out[0] = V6_PACKET_TOO_BIG;
    out[1] = 0;
    put16(out, 2, 0);
    put32(out, 4, mtu);
    out[HEADER_LEN..len].copy_from_slice(&offending[..len - HEADER_LEN]);
    let c = checksum::finish(checksum::sum(pseudo, &out[..len]));
    put16(out, 2, c);
    Ok(len)
}

/// The length of a packet-too-big message quoting a packet of `offending_len`.
#[inline]
pub fn ptb_len(offending_len: usize) -> usize {
    HEADER_LEN + offending_len.min(V6_QUOTE_MAX)
}

fn no_room(layer: Layer, needed: usize, available: usize) -> Error {
    Error::new(
        layer,
        0,
        ErrorKind::NoRoom {
            field: "message",
            needed,
            available,
        },
    )
}

/// The whole Ethernet frame answering `frame`, too big for a tunnel that
/// leaves `mtu` bytes for its IP packet: IPv4 with DF
/// gets "fragmentation needed" (RFC 1191), IPv6 "packet too big"
/// (RFC 4443); the reply is addressed back to the sender from the
/// original destination. `None` for anything else (no DF, not IP, or an
/// ICMP error itself).
pub fn too_big_reply(frame: &[u8], mtu: u16) -> Option<Vec<u8>> {
    use crate::ethernet::{EtherType, MacAddr};
    use crate::ipv4::IpProtocol;
    use crate::{ethernet, ipv4, ipv6};
    if frame.len() < 14 {
        return None;
    }
    let (dst_mac, src_mac) = (
        MacAddr::from_bytes(&frame[6..12]),
        MacAddr::from_bytes(&frame[0..6]),
    );
    let et = u16::from_be_bytes([frame[12], frame[13]]);
    let ip = &frame[14..];
    let mut out = vec![0u8; 14];
    match et {
        0x0800 => {
            let p = ipv4::Packet::new_checked(ip).ok()?;
            if !p.dont_frag()
                || (p.protocol() == IpProtocol::Icmp
                    && p.payload().first().is_some_and(|t| *t != 8 && *t != 0))
            {
                return None;
            }
            let mut msg = vec![0u8; HEADER_LEN + V4_QUOTE_MAX];
            let n = emit_frag_needed(p.packet(), mtu, &mut msg).ok()?;
            let mut hdr = [0u8; 20];
            ipv4::Repr {
                src: p.dst(),
                dst: p.src(),
                protocol: IpProtocol::Icmp,
                payload_len: n,
                tos: 0,
                ident: 0,
                dont_frag: false,
                ttl: 64,
            }
            .emit(&mut hdr);
            ethernet::Repr {
                dst: dst_mac,
                src: src_mac,
                ethertype: EtherType::Ipv4,
            }
            .emit(&mut out);
            out.extend_from_slice(&hdr);
            out.extend_from_slice(&msg[..n]);
        }
        0x86dd => {
            let p = ipv6::Packet::new_checked(ip).ok()?;
            if p.next_header() == IpProtocol::Icmpv6
                && p.payload().first().is_some_and(|t| *t < 128)
            {
                return None;
            }
            let whole = &ip[..ipv6::HEADER_LEN + p.payload_len() as usize];
            let len = ptb_len(whole.len());
            let pseudo = checksum::pseudo_v6(p.dst().octets(), p.src().octets(), 58, len as u32);
            let mut msg = vec![0u8; len];
            emit_packet_too_big(whole, mtu as u32, pseudo, &mut msg).ok()?;
            let mut hdr = [0u8; 40];
            ipv6::Repr {
                src: p.dst(),
                dst: p.src(),
                next_header: IpProtocol::Icmpv6,
                payload_len: len,
                traffic_class: 0,
                flow_label: 0,
                hop_limit: 64,
            }
            .emit(&mut hdr);
            ethernet::Repr {
                dst: dst_mac,
                src: src_mac,
                ethertype: EtherType::Ipv6,
            }
            .emit(&mut out);
            out.extend_from_slice(&hdr);
            out.extend_from_slice(&msg);
        }
        _ => return None,
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_big_replies() {
        // IPv4 UDP with DF, 1451 bytes of IP.
        let mut f = vec![0u8; 14 + 1451];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12] = 0x08;
        let ip = crate::ipv4::Repr {
            src: "192.168.7.1".parse().unwrap(),
            dst: "192.168.7.2".parse().unwrap(),
            protocol: crate::ipv4::IpProtocol::Udp,
            payload_len: 1431,
            tos: 0,
            ident: 9,
            dont_frag: true,
            ttl: 64,
        };
        ip.emit(&mut f[14..]);
        let r = too_big_reply(&f, 1450).unwrap();
        assert_eq!(&r[0..6], &f[6..12], "back to the sender's MAC");
        let p = crate::ipv4::Packet::new_checked(&r[14..]).unwrap();
        assert_eq!(
            (p.src().to_string(), p.dst().to_string()),
            ("192.168.7.2".into(), "192.168.7.1".into())
        );
        assert!(p.verify_checksum());
        let m = Packet::new_checked(p.payload()).unwrap();
        assert_eq!((m.msg_type(), m.code(), m.v4_next_hop_mtu()), (3, 4, 1450));
        assert!(m.verify_checksum_v4());
        // Without DF: no ICMP.
        f[20] = 0;
        assert!(too_big_reply(&f, 1450).is_none());
    }

    #[test]
    fn frag_needed_quotes_and_checksums() {
        let offending: Vec<u8> = (0..1600u32).map(|i| i as u8).collect();
        let mut out = [0xa5u8; 600];
        let n = emit_frag_needed(&offending, 1450, &mut out).unwrap();
        assert_eq!(n, 8 + 548);
        let p = Packet::new_checked(&out[..n]).unwrap();
        assert_eq!((p.msg_type(), p.code(), p.v4_next_hop_mtu()), (3, 4, 1450));
        assert!(p.verify_checksum_v4());
        assert_eq!(p.data(), &offending[..548]);
        let mut small = [0u8; 100];
        assert!(emit_frag_needed(&offending, 1450, &mut small).is_err());
    }

    #[test]
    fn packet_too_big_checksums_with_pseudo_header() {
        let offending = [0x60u8; 100];
        let src = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let len = ptb_len(offending.len());
        let pseudo = checksum::pseudo_v6(src, dst, 58, len as u32);
        let mut out = [0u8; 200];
        let n = emit_packet_too_big(&offending, 1280, pseudo, &mut out).unwrap();
        let p = Packet::new_checked(&out[..n]).unwrap();
        assert_eq!((p.msg_type(), p.v6_mtu()), (2, 1280));
        assert!(p.verify_checksum_v6(pseudo));
    }
}
