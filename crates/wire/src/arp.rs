//! ARP for IPv4 over Ethernet (RFC 826).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |       Hardware type (1)       |     Protocol type (0x0800)    |
//! |  HW len (6)   | Proto len (4) |           Operation           |
//! |        Sender hardware address (6) ... sender IP (4)          |
//! |        Target hardware address (6) ... target IP (4)          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::error::{need, Error, Layer, Result};
use crate::ethernet::MacAddr;
use crate::{be16, put16};
use std::net::Ipv4Addr;

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;

/// A zero-copy view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone)]
pub struct Packet<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Only Ethernet/IPv4 ARP (htype 1, ptype 0x0800, lengths 6 and 4) is
    /// accepted; anything else is refused with the field that differs.
    #[inline]
    pub fn new_checked(buf: T) -> Result<Packet<T>> {
        let b = buf.as_ref();
        need(Layer::Arp, "packet", b, 0, PACKET_LEN)?;
        if be16(b, 0) != 1 {
            return Err(Error::invalid(
                Layer::Arp,
                "hardware type",
                0,
                "not 1 (Ethernet)",
            ));
        }
        if be16(b, 2) != 0x0800 {
            return Err(Error::invalid(
                Layer::Arp,
                "protocol type",
                2,
                "not IPv4 (0x0800)",
            ));
        }
        if b[4] != 6 || b[5] != 4 {
            return Err(Error::invalid(
                Layer::Arp,
                "address lengths",
                4,
                "not 6 and 4",
            ));
        }
        Ok(Packet { buf })
    }

    #[inline]
    pub fn operation(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
    #[inline]
    pub fn sender_mac(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buf.as_ref()[8..14])
    }
    #[inline]
    pub fn sender_ip(&self) -> Ipv4Addr {
        ip_at(self.buf.as_ref(), 14)
    }
    #[inline]
    pub fn target_mac(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buf.as_ref()[18..24])
    }
    #[inline]
    pub fn target_ip(&self) -> Ipv4Addr {
        ip_at(self.buf.as_ref(), 24)
    }
}

fn ip_at(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

/// ARP operations.
pub const OP_REQUEST: u16 = 1;
pub const OP_REPLY: u16 = 2;

/// An Ethernet/IPv4 ARP packet as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub operation: u16,
    pub sender_mac: MacAddr,
    pub sender_ip: Ipv4Addr,
    pub target_mac: MacAddr,
    pub target_ip: Ipv4Addr,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            operation: p.operation(),
            sender_mac: p.sender_mac(),
            sender_ip: p.sender_ip(),
            target_mac: p.target_mac(),
            target_ip: p.target_ip(),
        }
    }

    #[inline]
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    #[inline]
    pub fn emit(&self, b: &mut [u8]) {
        put16(b, 0, 1);
        put16(b, 2, 0x0800);
        b[4] = 6;
        b[5] = 4;
        put16(b, 6, self.operation);
        b[8..14].copy_from_slice(&self.sender_mac.0);
        b[14..18].copy_from_slice(&self.sender_ip.octets());
        b[18..24].copy_from_slice(&self.target_mac.0);
        b[24..28].copy_from_slice(&self.target_ip.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 10, 0,
        0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ];

    #[test]
    fn golden_roundtrip() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        let r = Repr::parse(&p);
        assert_eq!(r.operation, OP_REQUEST);
        assert_eq!(r.sender_ip, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(r.target_ip, Ipv4Addr::new(10, 0, 0, 2));
        let mut b = [0xa5u8; 28];
        r.emit(&mut b);
        assert_eq!(b, GOLDEN);
    }

    #[test]
    fn rejects_other_hardware() {
        let mut g = GOLDEN;
        g[1] = 6;
        let e = Packet::new_checked(&g[..]).unwrap_err();
        assert_eq!(e.offset, 0);
        assert!(e.to_string().contains("hardware type"));
    }
}
