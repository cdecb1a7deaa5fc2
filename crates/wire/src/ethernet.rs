//! Ethernet II frames (IEEE 802.3 § 3.1.1, DIX framing only).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Destination MAC (6 octets)                   |
//! +                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                               |                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+    Source MAC (6 octets)      +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           EtherType           |          Payload ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::error::{need, Layer, Result};
use crate::{be16, put16};

mod field {
    use std::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: usize = 14;
}

/// Length of an Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    #[inline]
    pub fn from_bytes(b: &[u8]) -> MacAddr {
        let mut m = [0u8; 6];
        m.copy_from_slice(&b[..6]);
        MacAddr(m)
    }

    #[inline]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl std::fmt::Display for MacAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl std::fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Why a MAC address string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a MAC address (expected six hex bytes like 40:a6:b7:0b:e9:b1)")]
pub struct MacParseError(pub String);

impl std::str::FromStr for MacAddr {
    type Err = MacParseError;
    fn from_str(s: &str) -> std::result::Result<MacAddr, MacParseError> {
        let err = || MacParseError(s.to_string());
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for o in out.iter_mut() {
            let p = parts.next().ok_or_else(err)?;
            if p.is_empty() || p.len() > 2 {
                return Err(err());
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| err())?;
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(MacAddr(out))
    }
}

/// EtherType values that tunlab knows (IEEE registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    Ipv4,
    Arp,
    /// IEEE 802.1Q customer VLAN tag (C-tag).
    Vlan,
    /// IEEE 802.1ad service VLAN tag (S-tag), the outer tag of QinQ.
    QinQ,
    Ipv6,
    /// Transparent Ethernet bridging: an Ethernet frame follows (Geneve, NVGRE).
    TransEtherBridging,
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> EtherType {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x8100 => EtherType::Vlan,
            0x88a8 => EtherType::QinQ,
            0x86dd => EtherType::Ipv6,
            0x6558 => EtherType::TransEtherBridging,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> u16 {
        match v {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Vlan => 0x8100,
            EtherType::QinQ => 0x88a8,
            EtherType::Ipv6 => 0x86dd,
            EtherType::TransEtherBridging => 0x6558,
            EtherType::Unknown(v) => v,
        }
    }
}

impl EtherType {
    /// The name Wireshark and scapy show for it.
    #[inline]
    pub fn name(self) -> &'static str {
        match self {
            EtherType::Ipv4 => "IPv4",
            EtherType::Arp => "ARP",
            EtherType::Vlan => "802.1Q",
            EtherType::QinQ => "802.1ad",
            EtherType::Ipv6 => "IPv6",
            EtherType::TransEtherBridging => "TEB",
            EtherType::Unknown(_) => "unknown",
        }
    }

    /// Is this a VLAN tag's TPID (C-tag or S-tag)?
    #[inline]
    pub fn is_vlan_tpid(self) -> bool {
        matches!(self, EtherType::Vlan | EtherType::QinQ)
    }
}

/// A zero-copy view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct Frame<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// A view after checking that the header fits.
    #[inline]
    pub fn new_checked(buf: T) -> Result<Frame<T>> {
        need(Layer::Ethernet, "header", buf.as_ref(), 0, HEADER_LEN)?;
        Ok(Frame { buf })
    }

    #[inline]
    pub fn dst(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buf.as_ref()[field::DST])
    }

    #[inline]
    pub fn src(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buf.as_ref()[field::SRC])
    }

    #[inline]
    pub fn ethertype(&self) -> EtherType {
        be16(self.buf.as_ref(), field::ETHERTYPE.start).into()
    }

    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    #[inline]
    pub fn set_dst(&mut self, m: MacAddr) {
        self.buf.as_mut()[field::DST].copy_from_slice(&m.0);
    }
    #[inline]
    pub fn set_src(&mut self, m: MacAddr) {
        self.buf.as_mut()[field::SRC].copy_from_slice(&m.0);
    }
    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        put16(self.buf.as_mut(), field::ETHERTYPE.start, t.into());
    }
}

/// An Ethernet II header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub dst: MacAddr,
    pub src: MacAddr,
    pub ethertype: EtherType,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(f: &Frame<T>) -> Repr {
        Repr {
            dst: f.dst(),
            src: f.src(),
            ethertype: f.ethertype(),
        }
    }

    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into the first 14 bytes of `buf`, which must hold them.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::DST].copy_from_slice(&self.dst.0);
        buf[field::SRC].copy_from_slice(&self.src.0);
        put16(buf, field::ETHERTYPE.start, self.ethertype.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // dst fa:16:3e:40:4d:7d, src 40:a6:b7:0b:e9:b1, 802.1Q.
    const GOLDEN: [u8; 14] = [
        0xfa, 0x16, 0x3e, 0x40, 0x4d, 0x7d, 0x40, 0xa6, 0xb7, 0x0b, 0xe9, 0xb1, 0x81, 0x00,
    ];

    #[test]
    fn parse_golden() {
        let f = Frame::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(f.dst().to_string(), "fa:16:3e:40:4d:7d");
        assert_eq!(f.src().to_string(), "40:a6:b7:0b:e9:b1");
        assert_eq!(f.ethertype(), EtherType::Vlan);
    }

    #[test]
    fn emit_golden() {
        let r = Repr {
            dst: "fa:16:3e:40:4d:7d".parse().unwrap(),
            src: "40:a6:b7:0b:e9:b1".parse().unwrap(),
            ethertype: EtherType::Vlan,
        };
        let mut b = [0xa5u8; 14];
        r.emit(&mut b);
        assert_eq!(b, GOLDEN);
    }

    #[test]
    fn truncated_names_field_and_offset() {
        let e = Frame::new_checked(&GOLDEN[..13]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ethernet: header: needs 14 bytes, only 13 available (at byte offset 0)"
        );
    }

    #[test]
    fn mac_parse_errors() {
        assert!("fa:16:3e:40:4d".parse::<MacAddr>().is_err());
        assert!("fa:16:3e:40:4d:7d:00".parse::<MacAddr>().is_err());
        assert!("zz:16:3e:40:4d:7d".parse::<MacAddr>().is_err());
        assert_eq!(
            "FA-16-3E-40-4D-7D".parse::<MacAddr>().unwrap().to_string(),
            "fa:16:3e:40:4d:7d"
        );
    }

    #[test]
    fn ethertype_roundtrip() {
        for v in [0x0800u16, 0x0806, 0x8100, 0x88a8, 0x86dd, 0x6558, 0x1234] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
    }
}
