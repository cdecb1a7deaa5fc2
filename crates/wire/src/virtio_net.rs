//! The virtio-net header (virtio 1.x § 5.1.6) that a TAP device opened with
//! `IFF_VNET_HDR` puts before every frame: how the kernel (or the guest)
//! left checksums and segmentation for the other side to finish. With it a
//! tenant can hand over a 64 KB TCP super-frame with one checksum partial.
//!
//! ```text
//!  0               1               2               3
//! +---------------+---------------+-------------------------------+
//! |     flags     |   gso_type    |       hdr_len (LE)            |
//! +---------------+---------------+-------------------------------+
//! |        gso_size (LE)          |       csum_start (LE)         |
//! +-------------------------------+-------------------------------+
//! |       csum_offset (LE)        |  num_buffers (LE, 12-byte     |
//! +-------------------------------+  header only)                 |
//! ```
//!
//! Fields are little-endian: TAP uses the host's byte order unless told
//! otherwise (`TUNSETVNETLE`), and tunlab runs on little-endian hosts.

use crate::error::{need, Layer, Result};

/// The header length without `num_buffers`, and with it (virtio 1.x).
pub const HEADER_LEN: usize = 10;
pub const HEADER_LEN_V1: usize = 12;

/// `flags` bits.
pub const F_NEEDS_CSUM: u8 = 1;
pub const F_DATA_VALID: u8 = 2;

/// `gso_type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GsoType {
    None,
    TcpV4,
    Udp,
    TcpV6,
    /// UDP segmentation offload (USO), Linux 6.2+.
    UdpL4,
    Unknown(u8),
}

impl From<u8> for GsoType {
    fn from(v: u8) -> GsoType {
        match v & 0x7f {
            0 => GsoType::None,
            1 => GsoType::TcpV4,
            3 => GsoType::Udp,
            4 => GsoType::TcpV6,
            5 => GsoType::UdpL4,
            o => GsoType::Unknown(o),
        }
    }
}

impl From<GsoType> for u8 {
    fn from(g: GsoType) -> u8 {
        match g {
            GsoType::None => 0,
            GsoType::TcpV4 => 1,
            GsoType::Udp => 3,
            GsoType::TcpV6 => 4,
            GsoType::UdpL4 => 5,
            GsoType::Unknown(o) => o,
        }
    }
}

/// The ECN bit of `gso_type`: the segments carry CWR as TCP ECN requires.
pub const GSO_ECN: u8 = 0x80;

#[inline(always)]
fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// A zero-copy view of a virtio-net header (10 bytes read).
#[derive(Debug, Clone)]
pub struct Header<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    #[inline]
    pub fn new_checked(buf: T) -> Result<Header<T>> {
        need(
            Layer::Buffer,
            "virtio-net header",
            buf.as_ref(),
            0,
            HEADER_LEN,
        )?;
        Ok(Header { buf })
    }
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[0]
    }
    #[inline]
    pub fn gso_type(&self) -> GsoType {
        self.buf.as_ref()[1].into()
    }
    #[inline]
    pub fn gso_ecn(&self) -> bool {
        self.buf.as_ref()[1] & GSO_ECN != 0
    }
    /// Length of the headers (L2 to L4) before the payload to segment.
    #[inline]
    pub fn hdr_len(&self) -> u16 {
        le16(self.buf.as_ref(), 2)
    }
    /// Payload bytes per segment.
    #[inline]
    pub fn gso_size(&self) -> u16 {
        le16(self.buf.as_ref(), 4)
    }
    /// Where checksumming starts (from the frame's first byte).
    #[inline]
    pub fn csum_start(&self) -> u16 {
        le16(self.buf.as_ref(), 6)
    }
    /// Where, from `csum_start`, the checksum is stored.
    #[inline]
    pub fn csum_offset(&self) -> u16 {
        le16(self.buf.as_ref(), 8)
    }
}

/// A virtio-net header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub flags: u8,
    pub gso_type: GsoType,
    pub gso_ecn: bool,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl Repr {
    /// A header that asks for nothing: checksums complete, no segmentation.
    pub const NONE: Repr = Repr {
        flags: 0,
        gso_type: GsoType::None,
        gso_ecn: false,
        hdr_len: 0,
        gso_size: 0,
        csum_start: 0,
        csum_offset: 0,
    };

    #[inline]
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Repr {
        Repr {
            flags: h.flags(),
            gso_type: h.gso_type(),
            gso_ecn: h.gso_ecn(),
            hdr_len: h.hdr_len(),
            gso_size: h.gso_size(),
            csum_start: h.csum_start(),
            csum_offset: h.csum_offset(),
        }
    }

    /// Write the 10-byte header (the caller zeroes `num_buffers` if it uses
    /// the 12-byte form).
    #[inline]
    pub fn emit(&self, b: &mut [u8]) {
        b[0] = self.flags;
        b[1] = u8::from(self.gso_type) | if self.gso_ecn { GSO_ECN } else { 0 };
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }

    pub fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }
}

/// Is this frame's TCP or UDP checksum left partial, as a Linux sender
/// leaves it for offload (the field holds the folded pseudo-header sum)?
/// Such frames arrive through tunnels from kernels whose packets crossed
/// only veths, where no NIC ever finished the checksum. Returns where the
/// checksum starts and where it is stored, for a virtio-net NEEDS_CSUM
/// header so that the receiving kernel finishes it. A complete checksum
/// that happens to equal the pseudo-header sum (1 in 65536) is also marked;
/// for local delivery the kernel then trusts it, as it would any partial one.
pub fn partial_csum(frame: &[u8]) -> Option<(u16, u16)> {
    if frame.len() < 14 {
        return None;
    }
    let mut et = u16::from_be_bytes([frame[12], frame[13]]);
    let mut at = 14;
    while matches!(et, 0x8100 | 0x88a8) && frame.len() >= at + 4 {
        et = u16::from_be_bytes([frame[at + 2], frame[at + 3]]);
        at += 4;
    }
    let ip = &frame[at..];
    let (l4, proto, pseudo_of) = match et {
        0x0800 if ip.len() >= 20 => {
            let ihl = ((ip[0] & 0x0f) as usize) * 4;
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0
                || ihl < 20
                || total < ihl
                || total > ip.len()
            {
                return None; // fragments and odd headers: leave as they are
            }
            let len = total - ihl;
            let src = [ip[12], ip[13], ip[14], ip[15]];
            let dst = [ip[16], ip[17], ip[18], ip[19]];
            (
                at + ihl,
                ip[9],
                crate::checksum::pseudo_v4(src, dst, ip[9], len as u16),
            )
        }
        0x86dd if ip.len() >= 40 => {
            let len = u16::from_be_bytes([ip[4], ip[5]]) as u32;
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&ip[8..24]);
            dst.copy_from_slice(&ip[24..40]);
            (
                at + 40,
                ip[6],
                crate::checksum::pseudo_v6(src, dst, ip[6], len),
            )
        }
        _ => return None,
    };
    let offset = match proto {
        6 => 16,
        17 => 6,
        _ => return None,
    };
    if frame.len() < l4 + offset + 2 {
        return None;
    }
    let field = u16::from_be_bytes([frame[l4 + offset], frame[l4 + offset + 1]]);
    if proto == 17 && field == 0 {
        return None; // no UDP checksum at all
    }
    (field == crate::checksum::fold(pseudo_of)).then_some((l4 as u16, offset as u16))
}

/// Complete a checksum the kernel left partial (virtio-net NEEDS_CSUM):
/// the field already holds the pseudo-header sum; fold in the bytes from
/// `start`. Returns false if the offsets do not fit the frame.
pub fn complete_csum(frame: &mut [u8], start: usize, offset: usize) -> bool {
    let at = start + offset;
    if start > frame.len() || at + 2 > frame.len() {
        return false;
    }
    let c = crate::checksum::finish(crate::checksum::sum(0, &frame[start..]));
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_checksum_is_completed() {
        // A UDP header over 4 bytes of payload with the pseudo-header sum
        // pre-filled, as the kernel leaves it: the result must verify.
        let src = [10, 0, 0, 1];
        let dst = [10, 0, 0, 2];
        let mut seg = vec![0x13, 0x88, 0x17, 0x70, 0, 12, 0, 0, 1, 2, 3, 4];
        let pseudo = crate::checksum::fold(crate::checksum::pseudo_v4(src, dst, 17, 12));
        seg[6..8].copy_from_slice(&pseudo.to_be_bytes());
        assert!(complete_csum(&mut seg, 0, 6));
        assert!(crate::udp::Packet::new_checked(&seg[..])
            .unwrap()
            .verify_checksum(crate::checksum::pseudo_v4(src, dst, 17, 12)));
        assert!(!complete_csum(&mut seg, 20, 6));
    }

    #[test]
    fn partial_checksums_are_recognised() {
        // Ethernet + IPv4 + UDP(4 bytes of payload).
        let mut f = vec![0u8; 14 + 20 + 12];
        f[12] = 0x08;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&32u16.to_be_bytes());
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[38..40].copy_from_slice(&12u16.to_be_bytes());
        f[42..46].copy_from_slice(&[1, 2, 3, 4]);
        let pseudo = crate::checksum::fold(crate::checksum::pseudo_v4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            17,
            12,
        ));
        f[40..42].copy_from_slice(&pseudo.to_be_bytes());
        assert_eq!(partial_csum(&f), Some((34, 6)));
        // Finished, the checksum is no longer taken for partial.
        assert!(complete_csum(&mut f, 34, 6));
        assert_eq!(partial_csum(&f), None);
        f[40..42].copy_from_slice(&[0, 0]);
        assert_eq!(partial_csum(&f), None, "UDP without checksum");
        for n in 0..f.len() {
            let _ = partial_csum(&f[..n]);
        }
    }

    use proptest::prelude::*;

    /// A TCPv4 super-frame as the kernel hands it over: checksum partial
    /// from byte 34 (after Ethernet + IPv4), stored 16 bytes in; segments
    /// of 1448 bytes after 66 bytes of headers.
    const GOLDEN: [u8; 10] = [0x01, 0x01, 66, 0, 0xa8, 0x05, 34, 0, 16, 0];

    #[test]
    fn golden() {
        let h = Header::new_checked(&GOLDEN[..]).unwrap();
        let r = Repr::parse(&h);
        assert_eq!(r.gso_type, GsoType::TcpV4);
        assert_eq!(
            (r.hdr_len, r.gso_size, r.csum_start, r.csum_offset),
            (66, 1448, 34, 16)
        );
        assert!(r.needs_csum());
        let mut b = [0xa5u8; 10];
        r.emit(&mut b);
        assert_eq!(b, GOLDEN);
        assert!(Header::new_checked(&GOLDEN[..9]).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip(flags in any::<u8>(), gt in prop_oneof![Just(0u8), Just(1), Just(3), Just(4), Just(5)], ecn in any::<bool>(),
                     a in any::<u16>(), b in any::<u16>(), c in any::<u16>(), d in any::<u16>()) {
            let r = Repr { flags, gso_type: gt.into(), gso_ecn: ecn, hdr_len: a, gso_size: b, csum_start: c, csum_offset: d };
            let mut buf = [0u8; 10];
            r.emit(&mut buf);
            prop_assert_eq!(Repr::parse(&Header::new_checked(&buf[..]).unwrap()), r);
        }
    }
}
