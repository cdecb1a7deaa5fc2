//! GRE (RFC 2784) with the key and sequence extensions (RFC 2890), and
//! NVGRE (RFC 7637), which is GRE with a key holding a 24-bit VSID and an
//! 8-bit FlowID over transparent Ethernet bridging.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |C|R|K|S| Reserved0       | Ver |         Protocol Type         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |      Checksum (if C)          |       Reserved1 (if C)        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                         Key (if K)                            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Sequence Number (if S)                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! NVGRE key (RFC 7637 § 3.2):
//! |               Virtual Subnet ID (VSID)        |    FlowID     |
//! ```

use crate::checksum;
use crate::error::{need, Error, Layer, Result};
use crate::ethernet::EtherType;
use crate::{be16, be32, put16, put32, Vni};

pub const BASE_LEN: usize = 4;
/// The largest header: base, checksum, key and sequence number.
pub const MAX_HEADER_LEN: usize = 16;

pub const FLAG_C: u16 = 0x8000;
/// The bit RFC 1701 used for routing; RFC 2784 reserves it (must be zero).
pub const FLAG_R: u16 = 0x4000;
pub const FLAG_K: u16 = 0x2000;
pub const FLAG_S: u16 = 0x1000;
/// Reserved0 bits other than R (bits 4..12).
pub const RESERVED0_MASK: u16 = 0x0ff8;
pub const VERSION_MASK: u16 = 0x0007;

#[derive(Debug, Clone)]
pub struct Packet<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the header the flags announce fits in the buffer.
    #[inline]
    pub fn new_checked(buf: T) -> Result<Packet<T>> {
        let b = buf.as_ref();
        need(Layer::Gre, "header", b, 0, BASE_LEN)?;
        let f = be16(b, 0);
        let mut at = BASE_LEN;
        for (bit, name) in [
            (FLAG_C, "checksum"),
            (FLAG_K, "key"),
            (FLAG_S, "sequence number"),
        ] {
            if f & bit != 0 {
                need(Layer::Gre, name, b, at, 4)?;
                at += 4;
            }
        }
        Ok(Packet { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    fn flags_word(&self) -> u16 {
        be16(self.b(), 0)
    }
    #[inline]
    pub fn has_checksum(&self) -> bool {
        self.flags_word() & FLAG_C != 0
    }
    #[inline]
    pub fn has_key(&self) -> bool {
        self.flags_word() & FLAG_K != 0
    }
    #[inline]
    pub fn has_seq(&self) -> bool {
        self.flags_word() & FLAG_S != 0
    }
    /// Reserved0, R bit included, shifted down (10 bits: R and bits 4..12).
    #[inline]
    pub fn reserved0(&self) -> u16 {
        let f = self.flags_word();
        ((f & FLAG_R) >> 5) | ((f & RESERVED0_MASK) >> 3)
    }
    #[inline]
    pub fn version(&self) -> u8 {
        (self.flags_word() & VERSION_MASK) as u8
    }
    #[inline]
    pub fn protocol(&self) -> EtherType {
        be16(self.b(), 2).into()
    }
    #[inline]
    pub fn checksum(&self) -> Option<u16> {
        self.has_checksum().then(|| be16(self.b(), 4))
    }
    #[inline]
    pub fn reserved1(&self) -> Option<u16> {
        self.has_checksum().then(|| be16(self.b(), 6))
    }
    fn key_at(&self) -> usize {
        BASE_LEN + if self.has_checksum() { 4 } else { 0 }
    }
    #[inline]
    pub fn key(&self) -> Option<u32> {
        self.has_key().then(|| be32(self.b(), self.key_at()))
    }
    #[inline]
    pub fn seq(&self) -> Option<u32> {
        let at = self.key_at() + if self.has_key() { 4 } else { 0 };
        self.has_seq().then(|| be32(self.b(), at))
    }
    #[inline]
    pub fn header_len(&self) -> usize {
        BASE_LEN
            + 4 * (self.has_checksum() as usize + self.has_key() as usize + self.has_seq() as usize)
    }
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }
    /// RFC 2784 § 2.5: the checksum covers the GRE header and payload.
    /// `true` when there is no checksum.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        !self.has_checksum() || checksum::verify(self.b())
    }
    /// What a receiver must refuse (RFC 2784 § 2.3 and § 2.3.1): a version
    /// other than 0 or the reserved bits 1-5 set (RFC 1701 routing, strict
    /// source route, recursion control); bits 6-12 are ignored.
    #[inline]
    pub fn check(&self) -> Result<()> {
        if self.version() != 0 {
            return Err(Error::invalid(Layer::Gre, "version", 1, "must be 0"));
        }
        if self.flags_word() & (FLAG_R | 0x0c00) != 0 {
            return Err(Error::invalid(
                Layer::Gre,
                "reserved0",
                0,
                "bits 1-5 are set (RFC 1701 routing is not supported)",
            ));
        }
        if !self.verify_checksum() {
            return Err(Error::new(
                Layer::Gre,
                4,
                crate::ErrorKind::Checksum { field: "checksum" },
            ));
        }
        Ok(())
    }
}

/// A GRE header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub protocol: EtherType,
    /// Write a checksum (computed over header and payload by
    /// [`fill_checksum`]); `reserved1` goes beside it.
    pub checksum: bool,
    pub reserved1: u16,
    pub key: Option<u32>,
    pub seq: Option<u32>,
    /// Reserved0 as [`Packet::reserved0`] gives it (sender: zero).
    pub reserved0: u16,
    pub version: u8,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            protocol: p.protocol(),
            checksum: p.has_checksum(),
            reserved1: p.reserved1().unwrap_or(0),
            key: p.key(),
            seq: p.seq(),
            reserved0: p.reserved0(),
            version: p.version(),
        }
    }

    #[inline]
    pub fn buffer_len(&self) -> usize {
        BASE_LEN
            + 4 * (self.checksum as usize
                + self.key.is_some() as usize
                + self.seq.is_some() as usize)
    }

    /// Write the header (with a zero checksum) into `b`; returns its length.
    #[inline]
    pub fn emit(&self, b: &mut [u8]) -> usize {
        let mut f = (self.version as u16) & VERSION_MASK;
        f |= ((self.reserved0 << 5) & FLAG_R) | ((self.reserved0 << 3) & RESERVED0_MASK);
        let mut at = BASE_LEN;
        if self.checksum {
            f |= FLAG_C;
            put16(b, at, 0);
            put16(b, at + 2, self.reserved1);
            at += 4;
        }
        if let Some(k) = self.key {
            f |= FLAG_K;
            put32(b, at, k);
            at += 4;
        }
        if let Some(s) = self.seq {
            f |= FLAG_S;
            put32(b, at, s);
            at += 4;
        }
        put16(b, 0, f);
        put16(b, 2, self.protocol.into());
        at
    }
}

/// Fill the checksum of a GRE packet (header and payload in `b`) whose C bit
/// is set.
#[inline]
pub fn fill_checksum(b: &mut [u8]) {
    put16(b, 4, 0);
    let c = checksum::checksum(b);
    put16(b, 4, c);
}

/// NVGRE's key: VSID in the top 24 bits, FlowID in the low 8 (RFC 7637 § 3.2).
#[inline]
pub const fn nvgre_key(vsid: Vni, flow_id: u8) -> u32 {
    (vsid.get() << 8) | flow_id as u32
}

/// Split an NVGRE key into VSID and FlowID.
#[inline]
pub const fn nvgre_split(key: u32) -> (Vni, u8) {
    (Vni::from_masked(key >> 8), key as u8)
}

/// Is this GRE header NVGRE's (RFC 7637 § 3.2: K set, C and S clear,
/// protocol 0x6558)?
#[inline]
pub fn is_nvgre<T: AsRef<[u8]>>(p: &Packet<T>) -> bool {
    p.has_key()
        && !p.has_checksum()
        && !p.has_seq()
        && p.protocol() == EtherType::TransEtherBridging
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nvgre_golden() {
        let r = Repr {
            protocol: EtherType::TransEtherBridging,
            checksum: false,
            reserved1: 0,
            key: Some(nvgre_key(Vni::new(0xabcdef).unwrap(), 0x42)),
            seq: None,
            reserved0: 0,
            version: 0,
        };
        let mut b = [0xa5u8; 8];
        assert_eq!(r.emit(&mut b), 8);
        assert_eq!(b, [0x20, 0x00, 0x65, 0x58, 0xab, 0xcd, 0xef, 0x42]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(is_nvgre(&p));
        assert_eq!(
            nvgre_split(p.key().unwrap()),
            (Vni::new(0xabcdef).unwrap(), 0x42)
        );
    }

    #[test]
    fn checksum_covers_payload() {
        let r = Repr {
            protocol: EtherType::Ipv4,
            checksum: true,
            reserved1: 0,
            key: Some(7),
            seq: Some(9),
            reserved0: 0,
            version: 0,
        };
        let mut b = [0u8; 16 + 5];
        let n = r.emit(&mut b);
        assert_eq!(n, 16);
        b[16..].copy_from_slice(b"hello");
        fill_checksum(&mut b);
        let p = Packet::new_checked(&b[..]).unwrap();
        p.check().unwrap();
        assert_eq!((p.key(), p.seq()), (Some(7), Some(9)));
        b[20] ^= 1;
        let e = Packet::new_checked(&b[..]).unwrap().check().unwrap_err();
        assert!(e.to_string().contains("bad checksum"));
    }

    #[test]
    fn truncated_key_names_field() {
        let b = [0x20, 0x00, 0x65, 0x58, 0xab];
        let e = Packet::new_checked(&b[..]).unwrap_err();
        assert_eq!(e.offset, 4);
        assert!(e.to_string().contains("key"));
    }

    proptest! {
        #[test]
        fn roundtrip_every_field(
            proto in any::<u16>(), c in any::<bool>(), r1 in any::<u16>(), key in any::<Option<u32>>(),
            seq in any::<Option<u32>>(), r0 in 0u16..0x400, ver in 0u8..8
        ) {
            let r = Repr { protocol: proto.into(), checksum: c, reserved1: if c { r1 } else { 0 }, key, seq,
                           reserved0: r0, version: ver };
            let mut b = [0xa5u8; 16];
            let n = r.emit(&mut b);
            prop_assert_eq!(n, r.buffer_len());
            let p = Packet::new_checked(&b[..n]).unwrap();
            prop_assert_eq!(Repr::parse(&p), r);
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = (p.payload(), p.key(), p.seq(), p.checksum(), p.check());
            }
        }
    }
}
