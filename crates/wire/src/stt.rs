//! STT, the Stateless Transport Tunneling protocol (draft-davie-stt-08).
//!
//! An STT frame (this header, then the tenant's Ethernet frame) travels as
//! the payload of a TCP-like header to port 7471, so that NICs and the
//! kernel segment it with ordinary TSO. Each segment's TCP header carries:
//!
//! * sequence number: STT frame length in the top 16 bits, this segment's
//!   offset within the frame in the low 16 bits (draft § 3.2);
//! * acknowledgement number: an identifier of the frame, the same in every
//!   segment, so that the receiver can reassemble without connection state.
//!
//! The STT frame header (draft § 3.1):
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Version    | Flags         |  L4 Offset    |  Reserved     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Max. Segment Size          | PCP |V|     VLAN ID           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     Context ID (64 bits)                      |
//! +                                                               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Padding (2 octets)        |   tenant Ethernet frame ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Flags: bit 0 checksum verified, bit 1 checksum partial,
//!        bit 2 IPv4 (clear: IPv6), bit 3 TCP payload, bits 4-7 reserved.
//! ```

use crate::error::{need, Error, Layer, Result};
use crate::{be16, be32, put16};
use std::net::IpAddr;

/// The frame header with its padding.
pub const HEADER_LEN: usize = 18;
/// The destination port STT uses (draft § 8).
pub const TCP_PORT: u16 = 7471;
/// The only version the draft defines.
pub const VERSION: u8 = 0;

pub mod flags {
    pub const CSUM_VERIFIED: u8 = 1 << 0;
    pub const CSUM_PARTIAL: u8 = 1 << 1;
    pub const IPV4: u8 = 1 << 2;
    pub const TCP: u8 = 1 << 3;
}

/// A zero-copy view of an STT frame (header and tenant frame).
#[derive(Debug, Clone)]
pub struct Packet<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    #[inline]
    pub fn new_checked(buf: T) -> Result<Packet<T>> {
        need(Layer::Stt, "frame header", buf.as_ref(), 0, HEADER_LEN)?;
        Ok(Packet { buf })
    }
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    #[inline]
    pub fn version(&self) -> u8 {
        self.b()[0]
    }
    #[inline]
    pub fn flags(&self) -> u8 {
        self.b()[1]
    }
    /// Offset of the tenant's L4 header from the start of the tenant frame,
    /// in 2-byte units (for checksum-partial and LSO).
    #[inline]
    pub fn l4_offset(&self) -> u8 {
        self.b()[2]
    }
    #[inline]
    pub fn reserved(&self) -> u8 {
        self.b()[3]
    }
    /// The MSS the receiver should use if it must resegment (LSO).
    #[inline]
    pub fn mss(&self) -> u16 {
        be16(self.b(), 4)
    }
    #[inline]
    pub fn pcp(&self) -> u8 {
        self.b()[6] >> 5
    }
    /// V: the VLAN fields are valid.
    #[inline]
    pub fn vlan_valid(&self) -> bool {
        self.b()[6] & 0x10 != 0
    }
    #[inline]
    pub fn vlan_id(&self) -> u16 {
        be16(self.b(), 6) & 0x0fff
    }
    #[inline]
    pub fn context_id(&self) -> u64 {
        let b = self.b();
        ((be32(b, 8) as u64) << 32) | be32(b, 12) as u64
    }
    #[inline]
    pub fn padding(&self) -> u16 {
        be16(self.b(), 16)
    }
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }
    /// Checks what a receiver must refuse: an unknown version.
    #[inline]
    pub fn check(&self) -> Result<()> {
        if self.version() != VERSION {
            return Err(Error::invalid(Layer::Stt, "version", 0, "must be 0"));
        }
        Ok(())
    }
}

/// An STT frame header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    pub version: u8,
    pub flags: u8,
    pub l4_offset: u8,
    pub reserved: u8,
    pub mss: u16,
    pub pcp: u8,
    pub vlan_valid: bool,
    pub vlan_id: u16,
    pub context_id: u64,
    pub padding: u16,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            version: p.version(),
            flags: p.flags(),
            l4_offset: p.l4_offset(),
            reserved: p.reserved(),
            mss: p.mss(),
            pcp: p.pcp(),
            vlan_valid: p.vlan_valid(),
            vlan_id: p.vlan_id(),
            context_id: p.context_id(),
            padding: p.padding(),
        }
    }
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    #[inline]
    pub fn emit(&self, b: &mut [u8]) {
        b[0] = self.version;
        b[1] = self.flags;
        b[2] = self.l4_offset;
        b[3] = self.reserved;
        put16(b, 4, self.mss);
        let tci = ((self.pcp as u16 & 7) << 13)
            | ((self.vlan_valid as u16) << 12)
            | (self.vlan_id & 0x0fff);
        put16(b, 6, tci);
        b[8..16].copy_from_slice(&self.context_id.to_be_bytes());
        put16(b, 16, self.padding);
    }
}

/// Everything in front of a whole STT frame handed to the kernel to be
/// segmented as TCP (TSO, STT's reason to exist, § 2): Ethernet, IPv4,
/// TCP and the STT header, 72 bytes. The TCP checksum holds only the
/// pseudo-header sum (partial), as a virtio-net `NEEDS_CSUM` header asks;
/// the kernel's segmentation advances the sequence number by each
/// segment's length, which is exactly STT's offset in its low 16 bits.
pub const TSO_HDR_LEN: usize = 14 + 20 + 20 + HEADER_LEN;

/// What [`tso_headers`] needs besides the STT header.
#[derive(Debug, Clone, Copy)]
pub struct TsoOuter {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub src_port: u16,
    pub dst_port: u16,
    pub packet_id: u32,
}

/// Write the 72 header bytes for an STT frame whose tenant frame is
/// `inner_len` bytes; `None` if the STT frame would exceed 65535 bytes.
pub fn tso_headers(o: &TsoOuter, stt: &Repr, inner_len: usize, out: &mut [u8]) -> Option<()> {
    let frame_len = HEADER_LEN + inner_len;
    let ip_len = 20 + 20 + frame_len;
    if frame_len > MAX_FRAME || ip_len > u16::MAX as usize || out.len() < TSO_HDR_LEN {
        return None;
    }
    let h = &mut out[..TSO_HDR_LEN];
    h[0..6].copy_from_slice(&o.dst_mac);
    h[6..12].copy_from_slice(&o.src_mac);
    h[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut h[14..34];
    ip.fill(0);
    ip[0] = 0x45;
    put16(ip, 2, ip_len as u16);
    put16(ip, 4, o.packet_id as u16);
    ip[6] = 0x40; // DF: the kernel segments, nothing fragments
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&o.src);
    ip[16..20].copy_from_slice(&o.dst);
    let c = crate::checksum::checksum(ip);
    put16(ip, 10, c);
    let tcp = &mut h[34..54];
    crate::tcp::Repr {
        src_port: o.src_port,
        dst_port: o.dst_port,
        seq: seq(frame_len as u16, 0),
        ack: o.packet_id,
        flags: crate::tcp::flags::PSH | crate::tcp::flags::ACK,
        window: u16::MAX,
        urgent: 0,
    }
    .emit(tcp);
    let pseudo = crate::checksum::pseudo_v4(o.src, o.dst, 6, (20 + frame_len) as u16);
    put16(tcp, 16, crate::checksum::fold(pseudo));
    stt.emit(&mut h[54..TSO_HDR_LEN]);
    Some(())
}

/// The TCP sequence number of a segment: frame length and offset (§ 3.2).
#[inline]
pub const fn seq(frame_len: u16, offset: u16) -> u32 {
    ((frame_len as u32) << 16) | offset as u32
}

/// Split a TCP sequence number into frame length and offset.
#[inline]
pub const fn split_seq(seq: u32) -> (u16, u16) {
    ((seq >> 16) as u16, seq as u16)
}

/// Where each segment of an STT frame of `frame_len` bytes starts and how
/// long it is, when each carries at most `max_payload` bytes: the pure part
/// of segmentation. The caller writes a TCP header per segment with
/// [`seq`]`(frame_len, offset)` and the frame's packet ID.
#[inline]
pub fn segments(frame_len: usize, max_payload: usize) -> impl Iterator<Item = (usize, usize)> {
    let step = max_payload.max(1);
    (0..frame_len)
        .step_by(step)
        .map(move |off| (off, step.min(frame_len - off)))
}

/// Identifies the segments of one STT frame: outer addresses, source port
/// and the packet ID in the acknowledgement field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub packet_id: u32,
}

/// The largest STT frame: the 16-bit length of the sequence field.
pub const MAX_FRAME: usize = u16::MAX as usize;

struct Slot {
    key: Option<FrameKey>,
    total: usize,
    received: usize,
    born: u64,
    data: Box<[u8]>,
    /// One bit per byte of `data` already received.
    have: Box<[u64]>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            key: None,
            total: 0,
            received: 0,
            born: 0,
            data: vec![0; MAX_FRAME].into_boxed_slice(),
            have: vec![0; MAX_FRAME.div_ceil(64)].into_boxed_slice(),
        }
    }

    /// Mark `[from, to)` received; returns how many of those bytes were new.
    fn mark(&mut self, from: usize, to: usize) -> usize {
        let mut new = 0;
        let mut i = from;
        while i < to {
            let w = i / 64;
            let lo = i % 64;
            let hi = (to - w * 64).min(64);
            let mask = if hi - lo == 64 {
                u64::MAX
            } else {
                ((1u64 << (hi - lo)) - 1) << lo
            };
            new += (mask & !self.have[w]).count_ones() as usize;
            self.have[w] |= mask;
            i = w * 64 + hi;
        }
        new
    }

    fn clear(&mut self) {
        let words = self.total.div_ceil(64);
        self.have[..words].fill(0);
        self.key = None;
        self.total = 0;
        self.received = 0;
    }
}

/// What [`Reassembler::push`] made of a segment.
#[derive(Debug, PartialEq, Eq)]
pub enum Reassembled<'a> {
    /// The frame is whole: these are all its bytes (STT header first).
    Complete(&'a [u8]),
    /// More segments are needed.
    Pending,
}

/// Reassembles segmented STT frames without connection state (§ 3.3).
///
/// All memory is allocated up front, `slots` frames of 64 KiB; a segment of
/// a new frame when every slot is busy evicts the oldest. It reads no clock:
/// callers pass `now` in whatever unit they keep, and call
/// [`Reassembler::expire`] to drop frames older than their timeout.
pub struct Reassembler {
    slots: Vec<Slot>,
    /// Frames dropped because a newer frame needed their slot or they timed out.
    pub evicted: u64,
}

impl std::fmt::Debug for Reassembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reassembler")
            .field("slots", &self.slots.len())
            .field(
                "busy",
                &self.slots.iter().filter(|s| s.key.is_some()).count(),
            )
            .field("evicted", &self.evicted)
            .finish()
    }
}

impl Reassembler {
    #[inline]
    pub fn new(slots: usize) -> Reassembler {
        Reassembler {
            slots: (0..slots.max(1)).map(|_| Slot::new()).collect(),
            evicted: 0,
        }
    }

    /// Add the payload of one segment whose TCP header had `seq` and whose
    /// frame is identified by `key`. A frame sent as one segment is returned
    /// at once without a copy.
    ///
    /// Errors (the segment is dropped, other frames are unaffected): offset
    /// plus length beyond the frame length, a frame length too short for the
    /// STT header, or a frame length that differs from earlier segments'
    /// (the half-built frame is then discarded too).
    #[inline]
    pub fn push<'a>(
        &'a mut self,
        key: FrameKey,
        seq: u32,
        payload: &'a [u8],
        now: u64,
    ) -> Result<Reassembled<'a>> {
        let (total, offset) = split_seq(seq);
        let (total, offset) = (total as usize, offset as usize);
        if total < HEADER_LEN {
            return Err(Error::invalid(
                Layer::Stt,
                "frame length",
                0,
                "shorter than the STT header",
            ));
        }
        if offset + payload.len() > total {
            return Err(Error::invalid(
                Layer::Stt,
                "fragment offset",
                2,
                "segment extends past the frame length",
            ));
        }
        if offset == 0 && payload.len() == total {
            return Ok(Reassembled::Complete(payload));
        }
        let idx = match self.slots.iter().position(|s| s.key == Some(key)) {
            Some(i) => {
                if self.slots[i].total != total {
                    self.slots[i].clear();
                    return Err(Error::invalid(
                        Layer::Stt,
                        "frame length",
                        0,
                        "differs from earlier segments of the same frame",
                    ));
                }
                i
            }
            None => {
                let i = match self.slots.iter().position(|s| s.key.is_none()) {
                    Some(i) => i,
                    None => {
                        let oldest = (0..self.slots.len())
                            .min_by_key(|&i| self.slots[i].born)
                            .unwrap_or(0);
                        self.slots[oldest].clear();
                        self.evicted += 1;
                        oldest
                    }
                };
                let s = &mut self.slots[i];
                s.key = Some(key);
                s.total = total;
                s.born = now;
                i
            }
        };
        let s = &mut self.slots[idx];
        s.data[offset..offset + payload.len()].copy_from_slice(payload);
        s.received += s.mark(offset, offset + payload.len());
        if s.received == s.total {
            let total = s.total;
            let words = total.div_ceil(64);
            s.have[..words].fill(0);
            s.key = None;
            s.received = 0;
            s.total = 0;
            return Ok(Reassembled::Complete(&s.data[..total]));
        }
        Ok(Reassembled::Pending)
    }

    /// Drop frames that started before `now - timeout`.
    #[inline]
    pub fn expire(&mut self, now: u64, timeout: u64) {
        for s in &mut self.slots {
            if s.key.is_some() && now.saturating_sub(s.born) > timeout {
                s.clear();
                self.evicted += 1;
            }
        }
    }

    /// Frames waiting for more segments.
    #[inline]
    pub fn pending(&self) -> usize {
        self.slots.iter().filter(|s| s.key.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    fn key(id: u32) -> FrameKey {
        FrameKey {
            src: Ipv4Addr::new(10, 0, 0, 1).into(),
            dst: Ipv4Addr::new(10, 0, 0, 2).into(),
            src_port: 50000,
            packet_id: id,
        }
    }

    #[test]
    fn header_golden() {
        let r = Repr {
            version: 0,
            flags: flags::CSUM_PARTIAL | flags::IPV4 | flags::TCP,
            l4_offset: 17,
            reserved: 0,
            mss: 1448,
            pcp: 5,
            vlan_valid: true,
            vlan_id: 100,
            context_id: 0x0102_0304_0506_0708,
            padding: 0,
        };
        let mut b = [0xa5u8; 18];
        r.emit(&mut b);
        assert_eq!(
            b,
            [0, 0x0e, 17, 0, 0x05, 0xa8, 0xb0, 0x64, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0]
        );
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), r);
    }

    #[test]
    fn segments_tile_the_frame() {
        let s: Vec<_> = segments(3000, 1400).collect();
        assert_eq!(s, vec![(0, 1400), (1400, 1400), (2800, 200)]);
        assert_eq!(segments(0, 1400).count(), 0);
    }

    #[test]
    fn reassemble_out_of_order_with_duplicates() {
        let frame: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let mut r = Reassembler::new(2);
        let segs: Vec<_> = segments(frame.len(), 1448).collect();
        let order = [3, 1, 1, 0, 2];
        for (n, &i) in order.iter().enumerate() {
            let (off, len) = segs[i];
            let out = r
                .push(key(9), seq(5000, off as u16), &frame[off..off + len], 0)
                .unwrap();
            if n + 1 < order.len() {
                assert_eq!(out, Reassembled::Pending);
            } else {
                assert_eq!(out, Reassembled::Complete(&frame[..]));
            }
        }
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn single_segment_needs_no_copy() {
        let frame = [0u8; 100];
        let mut r = Reassembler::new(1);
        match r.push(key(1), seq(100, 0), &frame, 0).unwrap() {
            Reassembled::Complete(b) => assert!(std::ptr::eq(b, &frame[..])),
            Reassembled::Pending => panic!("single segment must complete"),
        }
    }

    #[test]
    fn bad_segments_are_refused() {
        let mut r = Reassembler::new(1);
        let e = r.push(key(1), seq(100, 90), &[0u8; 20], 0).unwrap_err();
        assert!(e.to_string().contains("fragment offset"));
        let e = r.push(key(1), seq(10, 0), &[0u8; 5], 0).unwrap_err();
        assert!(e.to_string().contains("shorter than the STT header"));
        assert_eq!(
            r.push(key(1), seq(100, 0), &[0u8; 50], 0).unwrap(),
            Reassembled::Pending
        );
        let e = r.push(key(1), seq(120, 50), &[0u8; 50], 0).unwrap_err();
        assert!(e.to_string().contains("differs"));
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn eviction_and_expiry() {
        let mut r = Reassembler::new(2);
        for id in 0..3 {
            assert_eq!(
                r.push(key(id), seq(100, 0), &[0u8; 50], id as u64).unwrap(),
                Reassembled::Pending
            );
        }
        assert_eq!((r.pending(), r.evicted), (2, 1));
        r.expire(100, 10);
        assert_eq!((r.pending(), r.evicted), (0, 3));
    }

    proptest! {
        #[test]
        fn header_roundtrip(v in any::<u8>(), f in any::<u8>(), l4 in any::<u8>(), rs in any::<u8>(), mss in any::<u16>(),
                            pcp in 0u8..8, vv in any::<bool>(), vid in 0u16..4096, ctx in any::<u64>(), pad in any::<u16>()) {
            let r = Repr { version: v, flags: f, l4_offset: l4, reserved: rs, mss, pcp, vlan_valid: vv, vlan_id: vid,
                           context_id: ctx, padding: pad };
            let mut b = [0xa5u8; 18];
            r.emit(&mut b);
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), r);
        }

        #[test]
        fn any_segmentation_and_order_reassembles(len in 18usize..20000, mss in 1usize..3000, seed in any::<u64>()) {
            let frame: Vec<u8> = (0..len).map(|i| (i as u64 ^ seed) as u8).collect();
            let mut segs: Vec<_> = segments(len, mss).collect();
            // A deterministic shuffle from the seed.
            let mut x = seed | 1;
            for i in (1..segs.len()).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                segs.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut r = Reassembler::new(1);
            let mut done = None;
            for (off, l) in segs {
                if let Reassembled::Complete(b) = r.push(key(7), seq(len as u16, off as u16), &frame[off..off + l], 0).unwrap() {
                    done = Some(b.to_vec());
                }
            }
            prop_assert_eq!(done, Some(frame));
        }
    }

    #[test]
    fn tso_headers_segment_into_what_receivers_reassemble() {
        let inner: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let r = Repr {
            flags: flags::CSUM_PARTIAL | flags::IPV4 | flags::TCP,
            l4_offset: 34,
            mss: 1448,
            context_id: 42,
            ..Repr::default()
        };
        let o = TsoOuter {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            src_port: 50000,
            dst_port: TCP_PORT,
            packet_id: 7,
        };
        let mut h = [0u8; TSO_HDR_LEN];
        tso_headers(&o, &r, inner.len(), &mut h).unwrap();
        assert!(crate::checksum::verify(&h[14..34]), "IPv4 header checksum");
        assert_eq!(crate::be16(&h, 16) as usize, 40 + HEADER_LEN + inner.len());
        let (len, off) = split_seq(crate::be32(&h, 34 + 4));
        assert_eq!((len as usize, off), (HEADER_LEN + inner.len(), 0));
        assert_eq!(crate::be32(&h, 34 + 8), 7, "packet ID in the ACK field");
        // The partial checksum completed over the segment verifies.
        let mut whole = h[34..].to_vec();
        whole.extend_from_slice(&inner);
        let c = crate::checksum::finish(crate::checksum::sum(0, &whole));
        whole[16..18].copy_from_slice(&c.to_be_bytes());
        let pseudo = crate::checksum::pseudo_v4(o.src, o.dst, 6, whole.len() as u16);
        assert_eq!(
            crate::checksum::fold(crate::checksum::sum(pseudo, &whole)),
            0xffff
        );
        assert_eq!(Repr::parse(&Packet::new_checked(&h[54..]).unwrap()), r);
        assert!(tso_headers(&o, &r, MAX_FRAME, &mut h).is_none());
    }
}
