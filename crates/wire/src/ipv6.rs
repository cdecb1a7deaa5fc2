//! IPv6 fixed header (RFC 8200 § 3). Extension headers are not walked: a
//! tunnel underlay does not carry them, and tenant packets are forwarded
//! without looking past the fixed header's Next Header.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version| Traffic Class |           Flow Label                  |
//! |         Payload Length        |  Next Header  |   Hop Limit   |
//! |                Source Address (16 octets)                     |
//! |             Destination Address (16 octets)                   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::error::{need, Error, Layer, Result};
use crate::ipv4::IpProtocol;
use crate::{be16, be32, put16, put32};
use std::net::Ipv6Addr;

pub const HEADER_LEN: usize = 40;

#[derive(Debug, Clone)]
pub struct Packet<T> {
    buf: T,
}

fn addr_at(b: &[u8], at: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    Ipv6Addr::from(a)
}

impl<T: AsRef<[u8]>> Packet<T> {
    #[inline]
    pub fn new_checked(buf: T) -> Result<Packet<T>> {
        let b = buf.as_ref();
        need(Layer::Ipv6, "header", b, 0, HEADER_LEN)?;
        if b[0] >> 4 != 6 {
            return Err(Error::invalid(Layer::Ipv6, "version", 0, "not 6"));
        }
        let plen = be16(b, 4) as usize;
        need(Layer::Ipv6, "payload length", b, HEADER_LEN, plen)?;
        Ok(Packet { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        ((be16(self.b(), 0) >> 4) & 0xff) as u8
    }
    #[inline]
    pub fn flow_label(&self) -> u32 {
        be32(self.b(), 0) & 0x000f_ffff
    }
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), 4)
    }
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        self.b()[6].into()
    }
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.b()[7]
    }
    #[inline]
    pub fn src(&self) -> Ipv6Addr {
        addr_at(self.b(), 8)
    }
    #[inline]
    pub fn dst(&self) -> Ipv6Addr {
        addr_at(self.b(), 24)
    }
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..HEADER_LEN + self.payload_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub next_header: IpProtocol,
    pub payload_len: usize,
    pub traffic_class: u8,
    pub flow_label: u32,
    pub hop_limit: u8,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            payload_len: p.payload_len() as usize,
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
        }
    }

    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    #[inline]
    pub fn emit(&self, b: &mut [u8]) {
        let w =
            (6u32 << 28) | ((self.traffic_class as u32) << 20) | (self.flow_label & 0x000f_ffff);
        put32(b, 0, w);
        put16(b, 4, self.payload_len as u16);
        b[6] = self.next_header.into();
        b[7] = self.hop_limit;
        b[8..24].copy_from_slice(&self.src.octets());
        b[24..40].copy_from_slice(&self.dst.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn roundtrip_and_etherparse_agrees(
            src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), nh in any::<u8>(),
            len in 0usize..600, tc in any::<u8>(), fl in 0u32..0x10_0000, hl in any::<u8>()
        ) {
            let r = Repr { src: src.into(), dst: dst.into(), next_header: nh.into(), payload_len: len,
                           traffic_class: tc, flow_label: fl, hop_limit: hl };
            let mut b = vec![0xa5u8; 40 + len];
            r.emit(&mut b);
            let p = Packet::new_checked(&b[..]).unwrap();
            prop_assert_eq!(Repr::parse(&p), r);
            let (h, _) = etherparse::Ipv6Header::from_slice(&b).unwrap();
            prop_assert_eq!(h.traffic_class, tc);
            prop_assert_eq!(h.flow_label.value(), fl);
            prop_assert_eq!(h.next_header.0, nh);
            prop_assert_eq!(h.hop_limit, hl);
            prop_assert_eq!(h.source, src);
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = (p.payload(), p.src(), p.flow_label());
            }
        }
    }

    #[test]
    fn truncated_payload_names_field() {
        let mut b = [0u8; 40];
        b[0] = 0x60;
        b[5] = 8;
        let e = Packet::new_checked(&b[..]).unwrap_err();
        assert_eq!(e.offset, 40);
        assert!(e.to_string().contains("payload length"));
    }
}
