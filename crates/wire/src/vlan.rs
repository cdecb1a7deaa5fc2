//! IEEE 802.1Q VLAN tags (C-tag, TPID 0x8100) and 802.1ad service tags
//! (S-tag, TPID 0x88a8): QinQ is an S-tag over a C-tag.
//!
//! A tag sits between the source MAC and the EtherType; this view starts at
//! the TCI, the TPID being the EtherType field that came before it:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | PCP |D|        VLAN ID        |   EtherType of what follows   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::buf::PacketBuf;
use crate::error::{need, Error, Layer, Result};
use crate::ethernet::{self, EtherType};
use crate::{be16, put16};

/// Bytes one tag adds to a frame.
pub const TAG_LEN: usize = 4;

/// A 12-bit VLAN identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct VlanId(u16);

impl VlanId {
    pub const MAX: u16 = 0x0fff;

    /// A VLAN ID, or `None` if `v` does not fit in 12 bits.
    #[inline]
    pub const fn new(v: u16) -> Option<VlanId> {
        if v <= Self::MAX {
            Some(VlanId(v))
        } else {
            None
        }
    }

    #[inline]
    pub const fn get(self) -> u16 {
        self.0
    }
}

/// A 3-bit priority code point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Pcp(u8);

impl Pcp {
    #[inline]
    pub const fn new(v: u8) -> Option<Pcp> {
        if v <= 7 {
            Some(Pcp(v))
        } else {
            None
        }
    }
    #[inline]
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// The 16-bit tag control information.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Tci {
    pub pcp: Pcp,
    /// Drop eligible indicator (formerly CFI).
    pub dei: bool,
    pub vid: VlanId,
}

impl Tci {
    #[inline]
    pub const fn from_u16(v: u16) -> Tci {
        Tci {
            pcp: Pcp((v >> 13) as u8),
            dei: v & 0x1000 != 0,
            vid: VlanId(v & 0x0fff),
        }
    }

    #[inline]
    pub const fn to_u16(self) -> u16 {
        ((self.pcp.0 as u16) << 13) | ((self.dei as u16) << 12) | self.vid.0
    }
}

/// A zero-copy view of one tag (TCI + inner EtherType).
#[derive(Debug, Clone)]
pub struct Tag<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Tag<T> {
    #[inline]
    pub fn new_checked(buf: T) -> Result<Tag<T>> {
        need(Layer::Vlan, "tag", buf.as_ref(), 0, TAG_LEN)?;
        Ok(Tag { buf })
    }

    #[inline]
    pub fn tci(&self) -> Tci {
        Tci::from_u16(be16(self.buf.as_ref(), 0))
    }

    #[inline]
    pub fn ethertype(&self) -> EtherType {
        be16(self.buf.as_ref(), 2).into()
    }

    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[TAG_LEN..]
    }
}

/// One tag as plain values: the TPID that announces it and its TCI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub tpid: EtherType,
    pub tci: Tci,
}

/// Push a tag with `tpid` (0x8100 or 0x88a8) right after the MAC addresses.
///
/// This is `push_vlan:TPID` followed by `mod_vlan_vid`: the new tag becomes
/// the outermost; the frame's former EtherType (perhaps another tag's TPID)
/// follows it. Only the 12 MAC bytes move, into the headroom.
#[inline]
pub fn push<B: AsRef<[u8]> + AsMut<[u8]>>(
    p: &mut PacketBuf<B>,
    tpid: EtherType,
    tci: Tci,
) -> Result<()> {
    if p.len() < ethernet::HEADER_LEN {
        return Err(Error::truncated(
            Layer::Ethernet,
            "header",
            0,
            ethernet::HEADER_LEN,
            p.len(),
        ));
    }
    // Layout after: dst src | tpid tci | old ethertype ...
    let d = p.insert_after(12, TAG_LEN)?;
    put16(d, 12, tpid.into());
    put16(d, 14, tci.to_u16());
    Ok(())
}

/// Pop the outermost tag, returning it; the frame keeps the tag's inner
/// EtherType. Fails if the frame is not tagged.
#[inline]
pub fn pop<B: AsRef<[u8]> + AsMut<[u8]>>(p: &mut PacketBuf<B>) -> Result<Repr> {
    let d = p.data();
    need(Layer::Vlan, "tag", d, ethernet::HEADER_LEN, TAG_LEN)?;
    let tpid = EtherType::from(be16(d, 12));
    if !tpid.is_vlan_tpid() {
        return Err(Error::invalid(
            Layer::Vlan,
            "tpid",
            12,
            "frame has no VLAN tag to pop",
        ));
    }
    let tci = Tci::from_u16(be16(d, 14));
    p.remove_after(12, TAG_LEN)?;
    Ok(Repr { tpid, tci })
}

/// The frame without its 802.1Q/802.1ad tags, and how many bytes of tags
/// it had.
pub fn strip_tags(frame: &[u8]) -> (usize, Vec<u8>) {
    let mut at = 12;
    while frame.len() >= at + 4
        && matches!(
            u16::from_be_bytes([frame[at], frame[at + 1]]),
            0x8100 | 0x88a8
        )
    {
        at += 4;
    }
    let mut out = frame[..12.min(frame.len())].to_vec();
    out.extend_from_slice(frame.get(at..).unwrap_or(&[]));
    (at - 12, out)
}

/// The outermost tag's TCI, or 0 if untagged (a new tag inherits it,
/// as OVS's `push_vlan` does).
pub fn outer_tci(frame: &[u8]) -> u16 {
    if frame.len() >= 16 && matches!(u16::from_be_bytes([frame[12], frame[13]]), 0x8100 | 0x88a8) {
        u16::from_be_bytes([frame[14], frame[15]])
    } else {
        0
    }
}

/// Rewrite the outermost tag's TCI with `f` (`mod_vlan_vid`, `mod_vlan_pcp`);
/// an untagged frame is left alone.
pub fn set_outer_tci(frame: &mut [u8], f: impl Fn(u16) -> u16) {
    if frame.len() >= 16 && matches!(u16::from_be_bytes([frame[12], frame[13]]), 0x8100 | 0x88a8) {
        let t = f(u16::from_be_bytes([frame[14], frame[15]]));
        frame[14..16].copy_from_slice(&t.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outer_tags_are_read_edited_and_stripped() {
        // dst, src, S-tag 0x2064, C-tag 0x000a, IPv4 EtherType, 2 bytes.
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[
            0x88, 0xa8, 0x20, 0x64, 0x81, 0x00, 0x00, 0x0a, 0x08, 0x00, 1, 2,
        ]);
        assert_eq!(outer_tci(&f), 0x2064);
        set_outer_tci(&mut f, |t| (t & 0xf000) | 0x123);
        assert_eq!(outer_tci(&f), 0x2123);
        let (tags, plain) = strip_tags(&f);
        assert_eq!(tags, 8);
        assert_eq!(&plain[12..], &[0x08, 0x00, 1, 2]);
        // Untagged and runt frames: nothing to read or edit.
        let mut u = plain.clone();
        assert_eq!(outer_tci(&u), 0);
        set_outer_tci(&mut u, |_| 0xffff);
        assert_eq!(u, plain);
        assert_eq!(strip_tags(&f[..5]), (0, f[..5].to_vec()));
        assert_eq!(strip_tags(&f[..15]).0, 0, "a cut tag is no tag");
    }

    use proptest::prelude::*;

    fn untagged() -> PacketBuf<Vec<u8>> {
        let mut p = PacketBuf::new(vec![0u8; 128], 64);
        let mut f = [0u8; 18];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14..].copy_from_slice(b"data");
        p.extend(&f).unwrap();
        p
    }

    #[test]
    fn qinq_push_pop_golden() {
        let mut p = untagged();
        let payload_at = p.head() + 14;
        push(&mut p, EtherType::Vlan, Tci::from_u16(0x0064)).unwrap(); // C-tag 100
        push(&mut p, EtherType::QinQ, Tci::from_u16(0xa005)).unwrap(); // S-tag 5, PCP 5
        assert_eq!(
            &p.data()[12..26],
            &[0x88, 0xa8, 0xa0, 0x05, 0x81, 0x00, 0x00, 0x64, 0x08, 0x00, b'd', b'a', b't', b'a']
        );
        // The payload did not move.
        assert_eq!(p.head() + 22, payload_at);
        let s = pop(&mut p).unwrap();
        assert_eq!(s.tpid, EtherType::QinQ);
        assert_eq!(s.tci.vid.get(), 5);
        assert_eq!(s.tci.pcp.get(), 5);
        let c = pop(&mut p).unwrap();
        assert_eq!(c.tpid, EtherType::Vlan);
        assert_eq!(c.tci.vid.get(), 100);
        assert_eq!(p.data(), untagged().data());
        assert!(pop(&mut p).is_err());
    }

    proptest! {
        #[test]
        fn tci_roundtrip(v in any::<u16>()) {
            prop_assert_eq!(Tci::from_u16(v).to_u16(), v);
        }
    }
}
