//! Packet formats of overlay networking, zero-copy, with in-place tunnel
//! encapsulation.
//!
//! This crate owns the bytes on the wire: one module per protocol, each with a
//! borrowed view (`Packet<T: AsRef<[u8]>>`) for parsing and a plain `Repr` for
//! building, plus [`tunnel`], which pushes and pops whole outer header stacks
//! in place on a [`PacketBuf`] with headroom.
//!
//! It must never do I/O, read a clock, or allocate on the per-packet path.
//! After a view's `new_checked` succeeds, none of its accessors panic: that is
//! the contract the fuzz targets hold it to.

pub mod arp;
pub mod buf;
pub mod checksum;
pub mod error;
pub mod ethernet;
pub mod flowhash;
#[doc(hidden)]
pub mod fuzz_targets;
pub mod geneve;
pub mod gre;
pub mod gso;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod openflow;
pub mod rewrite;
pub mod stt;
pub mod tcp;
pub mod tunnel;
pub mod udp;
pub mod virtio_net;
pub mod vlan;
pub mod vxlan;

pub use buf::PacketBuf;
pub use error::{Error, ErrorKind, Layer, Result};
pub use ethernet::{EtherType, MacAddr};
pub use ipv4::IpProtocol;

/// A 24-bit virtual network identifier (VXLAN VNI, Geneve VNI, NVGRE VSID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Vni(u32);

impl Vni {
    /// The largest VNI: 2^24 - 1.
    pub const MAX: u32 = 0x00ff_ffff;

    /// A VNI, or `None` if `v` does not fit in 24 bits.
    #[inline]
    pub const fn new(v: u32) -> Option<Vni> {
        if v <= Self::MAX {
            Some(Vni(v))
        } else {
            None
        }
    }

    /// The low 24 bits of `v` as a VNI.
    #[inline]
    pub const fn from_masked(v: u32) -> Vni {
        Vni(v & Self::MAX)
    }

    #[inline]
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl std::fmt::Display for Vni {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Bytes from hex digits as tcpdump, tshark and `ovs-ofctl` print them
/// (`"0104001400000002"`); `None` for an odd count or a non-hex digit.
/// Golden vectors are written this way.
///
/// ```
/// assert_eq!(tunlab_wire::from_hex("0a0B"), Some(vec![10, 11]));
/// assert_eq!(tunlab_wire::from_hex("0a0"), None);
/// assert_eq!(tunlab_wire::from_hex("0g"), None);
/// ```
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// Read a big-endian u16 at `at`; the caller has checked the length.
#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Read a big-endian u32 at `at`; the caller has checked the length.
#[inline(always)]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline(always)]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
