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

#[cfg(test)]
mod tests {
    use super::*;

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
