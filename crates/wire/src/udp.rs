//! UDP (RFC 768).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          Source Port          |       Destination Port        |
//! |            Length             |           Checksum            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! A zero checksum means "none" over IPv4 (RFC 768) and, for tunnel
//! protocols, over IPv6 too (RFC 6935, RFC 6936); a computed checksum of zero
//! is sent as 0xffff.

use crate::checksum;
use crate::error::{need, Error, Layer, Result};
use crate::{be16, put16};

pub const HEADER_LEN: usize = 8;

/// Well-known tunnel ports.
pub const PORT_VXLAN: u16 = 4789;
pub const PORT_GENEVE: u16 = 6081;

#[derive(Debug, Clone)]
pub struct Packet<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the header fits and that the length field covers the
    /// header and lies within the buffer.
    #[inline]
    pub fn new_checked(buf: T) -> Result<Packet<T>> {
        let b = buf.as_ref();
        need(Layer::Udp, "header", b, 0, HEADER_LEN)?;
        let len = be16(b, 4) as usize;
        if len < HEADER_LEN {
            return Err(Error::invalid(
                Layer::Udp,
                "length",
                4,
                "shorter than the header",
            ));
        }
        need(Layer::Udp, "length", b, 0, len)?;
        Ok(Packet { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.b(), 0)
    }
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), 2)
    }
    #[inline]
    pub fn len(&self) -> u16 {
        be16(self.b(), 4)
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() as usize == HEADER_LEN
    }
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 6)
    }
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.len() as usize]
    }
    /// Verify against a pseudo-header sum from [`checksum::pseudo_v4`] or
    /// [`checksum::pseudo_v6`]. A zero checksum verifies (none was sent).
    #[inline]
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        checksum::fold(checksum::sum(pseudo, &self.b()[..self.len() as usize])) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 0, v);
    }
    #[inline]
    pub fn set_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v);
    }
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), 6, v);
    }
    /// Compute the checksum over header and payload given the pseudo-header sum.
    #[inline]
    pub fn fill_checksum(&mut self, pseudo: u64) {
        let len = self.len() as usize;
        self.set_checksum(0);
        let c = checksum::finish(checksum::sum(pseudo, &self.buf.as_ref()[..len]));
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: usize,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: p.len() as usize - HEADER_LEN,
        }
    }
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Write the header with a zero checksum; fill it with
    /// [`Packet::fill_checksum`] once the payload is in place.
    #[inline]
    pub fn emit(&self, b: &mut [u8]) {
        put16(b, 0, self.src_port);
        put16(b, 2, self.dst_port);
        put16(b, 4, (HEADER_LEN + self.payload_len) as u16);
        put16(b, 6, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn checksum_agrees_with_etherparse(
            src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(), sp in any::<u16>(), dp in any::<u16>(),
            payload in proptest::collection::vec(any::<u8>(), 0..200)
        ) {
            let r = Repr { src_port: sp, dst_port: dp, payload_len: payload.len() };
            let mut b = vec![0xa5u8; 8 + payload.len()];
            r.emit(&mut b);
            b[8..].copy_from_slice(&payload);
            let pseudo = checksum::pseudo_v4(src, dst, 17, b.len() as u16);
            let mut p = Packet::new_checked(&mut b[..]).unwrap();
            p.fill_checksum(pseudo);
            prop_assert!(p.verify_checksum(pseudo));
            prop_assert_eq!(Repr::parse(&p), r);
            let h = etherparse::UdpHeader::with_ipv4_checksum(sp, dp,
                &etherparse::Ipv4Header::new(0, 64, etherparse::IpNumber::UDP, src, dst).unwrap(), &payload).unwrap();
            prop_assert_eq!(p.checksum(), h.checksum);
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = (p.payload(), p.verify_checksum(0));
            }
        }
    }

    #[test]
    fn short_length_field() {
        let b = [0, 1, 0, 2, 0, 7, 0, 0];
        let e = Packet::new_checked(&b[..]).unwrap_err();
        assert_eq!((e.layer, e.offset), (Layer::Udp, 4));
    }
}
