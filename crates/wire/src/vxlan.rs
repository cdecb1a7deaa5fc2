//! VXLAN (RFC 7348 § 5).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |R|R|R|R|I|R|R|R|            Reserved                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                VXLAN Network Identifier (VNI) |   Reserved    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::error::{need, Error, Layer, Result};
use crate::{be32, put32, Vni};

pub const HEADER_LEN: usize = 8;
/// RFC 7348 § 5: the IANA-assigned destination port.
pub const UDP_PORT: u16 = 4789;
/// The I flag: the VNI is valid.
pub const FLAG_I: u8 = 0x08;

#[derive(Debug, Clone)]
pub struct Packet<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    #[inline]
    pub fn new_checked(buf: T) -> Result<Packet<T>> {
        need(Layer::Vxlan, "header", buf.as_ref(), 0, HEADER_LEN)?;
        Ok(Packet { buf })
    }
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// All eight flag bits; only I (0x08) is defined.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.b()[0]
    }
    #[inline]
    pub fn vni_valid(&self) -> bool {
        self.flags() & FLAG_I != 0
    }
    /// The 24 reserved bits after the flags.
    #[inline]
    pub fn reserved1(&self) -> u32 {
        be32(self.b(), 0) & 0x00ff_ffff
    }
    #[inline]
    pub fn vni(&self) -> Vni {
        Vni::from_masked(be32(self.b(), 4) >> 8)
    }
    #[inline]
    pub fn reserved2(&self) -> u8 {
        self.b()[7]
    }
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }
    /// RFC 7348 § 5: "The I flag MUST be set to 1 for a valid VNI"; the
    /// reserved bits are ignored on receipt.
    #[inline]
    pub fn check(&self) -> Result<()> {
        if !self.vni_valid() {
            return Err(Error::invalid(
                Layer::Vxlan,
                "flags",
                0,
                "I flag is clear (no valid VNI)",
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub flags: u8,
    pub reserved1: u32,
    pub vni: Vni,
    pub reserved2: u8,
}

impl Repr {
    /// The header a sender writes: I set, reserved bits zero.
    #[inline]
    pub const fn new(vni: Vni) -> Repr {
        Repr {
            flags: FLAG_I,
            reserved1: 0,
            vni,
            reserved2: 0,
        }
    }
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            flags: p.flags(),
            reserved1: p.reserved1(),
            vni: p.vni(),
            reserved2: p.reserved2(),
        }
    }
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    #[inline]
    pub fn emit(&self, b: &mut [u8]) {
        put32(
            b,
            0,
            ((self.flags as u32) << 24) | (self.reserved1 & 0x00ff_ffff),
        );
        put32(b, 4, (self.vni.get() << 8) | self.reserved2 as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden() {
        let mut b = [0xa5u8; 8];
        Repr::new(Vni::new(0x123456).unwrap()).emit(&mut b);
        assert_eq!(b, [0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
        let p = Packet::new_checked(&b[..]).unwrap();
        p.check().unwrap();
        b[0] = 0;
        let e = Packet::new_checked(&b[..]).unwrap().check().unwrap_err();
        assert!(e.to_string().contains("I flag"));
    }

    proptest! {
        #[test]
        fn roundtrip(flags in any::<u8>(), r1 in 0u32..0x100_0000, vni in 0u32..=Vni::MAX, r2 in any::<u8>()) {
            let r = Repr { flags, reserved1: r1, vni: Vni::new(vni).unwrap(), reserved2: r2 };
            let mut b = [0xa5u8; 8];
            r.emit(&mut b);
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), r);
        }
    }
}
