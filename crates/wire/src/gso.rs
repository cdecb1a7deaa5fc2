//! TCP segmentation and coalescing in software: the two pure halves of
//! the super-frame path.
//!
//! A tenant TAP opened with TSO hands over TCP "super-frames" of up to
//! 64 KB: one Ethernet/IP/TCP header in front of many segments' worth of
//! payload, the virtio-net header saying the segment size (`gso_size`).
//! [`TcpSuper`] cuts one into the segments the wire carries, writing each
//! segment's headers (IP length and ID, TCP sequence, flags, checksum)
//! while the payload stays where it is, so that the caller can hand the
//! kernel header/payload pairs as an iovec without copying.
//!
//! On the way back, [`Coalescer`] joins consecutive segments of one TCP
//! flow into one super-frame again (what GRO does in the kernel), so the
//! receiving tenant gets one 64 KB write instead of 45 small ones. It
//! does not read the payload to check it: each segment's own TCP checksum
//! already covers its payload, so the payload sums are derived from those
//! fields, and the joined frame carries the checksum the joined bytes must
//! have. A segment damaged on the way makes that checksum wrong, and the
//! tenant's kernel, which verifies it, drops the frame.

use crate::checksum;
use std::ops::Range;

/// The longest header run a super-frame may have: Ethernet, two VLAN
/// tags, IPv4 with options (60) or IPv6 (40), TCP with options (60).
pub const MAX_HDR: usize = 14 + 8 + 60 + 60;

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_PSH: u8 = 0x08;
const TCP_ACK: u8 = 0x10;
const TCP_URG: u8 = 0x20;
const TCP_ECE: u8 = 0x40;
const TCP_CWR: u8 = 0x80;

/// Where the headers of a TCP frame are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpLayout {
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the TCP header.
    pub l4: usize,
    /// Length of everything up to the payload.
    pub hdr_len: usize,
    pub v6: bool,
}

impl TcpLayout {
    /// Find the headers of an Ethernet frame carrying TCP over IPv4 (not a
    /// fragment) or IPv6 (no extension headers), VLAN tags allowed.
    pub fn parse(frame: &[u8]) -> Result<TcpLayout, &'static str> {
        if frame.len() < 14 {
            return Err("short_frame");
        }
        let mut et = crate::be16(frame, 12);
        let mut l3 = 14;
        while matches!(et, 0x8100 | 0x88a8) {
            if frame.len() < l3 + 4 {
                return Err("short_frame");
            }
            et = crate::be16(frame, l3 + 2);
            l3 += 4;
        }
        let (l4, v6) = match et {
            0x0800 => {
                let ip = frame
                    .get(l3..)
                    .filter(|ip| ip.len() >= 20)
                    .ok_or("gso_not_tcp")?;
                let ihl = ((ip[0] & 0x0f) as usize) * 4;
                if ip[0] >> 4 != 4 || ihl < 20 || ip[9] != 6 || crate::be16(ip, 6) & 0x3fff != 0 {
                    return Err("gso_not_tcp");
                }
                (l3 + ihl, false)
            }
            0x86dd => {
                let ip = frame
                    .get(l3..)
                    .filter(|ip| ip.len() >= 40)
                    .ok_or("gso_not_tcp")?;
                if ip[6] != 6 {
                    return Err("gso_not_tcp");
                }
                (l3 + 40, true)
            }
            _ => return Err("gso_not_tcp"),
        };
        if frame.len() < l4 + 20 {
            return Err("gso_not_tcp");
        }
        let doff = ((frame[l4 + 12] >> 4) as usize) * 4;
        let hdr_len = l4 + doff;
        if doff < 20 || frame.len() < hdr_len || hdr_len > MAX_HDR {
            return Err("gso_not_tcp");
        }
        Ok(TcpLayout {
            l3,
            l4,
            hdr_len,
            v6,
        })
    }

    /// The pseudo-header sum for a TCP segment of `tcp_len` bytes.
    fn pseudo(&self, h: &[u8], tcp_len: usize) -> u64 {
        let ip = &h[self.l3..];
        if self.v6 {
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&ip[8..24]);
            dst.copy_from_slice(&ip[24..40]);
            checksum::pseudo_v6(src, dst, 6, tcp_len as u32)
        } else {
            let src = [ip[12], ip[13], ip[14], ip[15]];
            let dst = [ip[16], ip[17], ip[18], ip[19]];
            checksum::pseudo_v4(src, dst, 6, tcp_len as u16)
        }
    }

    /// Set the IP length fields of header run `h` for `payload` bytes of
    /// TCP payload, and the IPv4 header checksum.
    fn set_ip_len(&self, h: &mut [u8], payload: usize) {
        let ip = &mut h[self.l3..self.l4];
        if self.v6 {
            crate::put16(ip, 4, (self.hdr_len - self.l4 + payload) as u16);
        } else {
            crate::put16(ip, 2, (self.hdr_len - self.l3 + payload) as u16);
            crate::put16(ip, 10, 0);
            let c = checksum::checksum(ip);
            crate::put16(ip, 10, c);
        }
    }
}

/// A TCP super-frame to be cut into segments of `mss` payload bytes.
#[derive(Debug, Clone, Copy)]
pub struct TcpSuper {
    pub layout: TcpLayout,
    pub mss: usize,
    len: usize,
}

impl TcpSuper {
    /// Check that `frame` is a TCP super-frame that can be cut into
    /// segments of `gso_size` payload bytes; the error is a drop reason.
    pub fn parse(frame: &[u8], gso_size: u16) -> Result<TcpSuper, &'static str> {
        let layout = TcpLayout::parse(frame)?;
        if gso_size == 0 {
            return Err("gso_size_zero");
        }
        Ok(TcpSuper {
            layout,
            mss: gso_size as usize,
            len: frame.len(),
        })
    }

    /// How many segments: at least one, even for a frame without payload.
    pub fn segments(&self) -> usize {
        (self.len - self.layout.hdr_len).div_ceil(self.mss).max(1)
    }

    /// The header run's length (the same for every segment).
    pub fn hdr_len(&self) -> usize {
        self.layout.hdr_len
    }

    /// Write segment `i`'s headers into `out[..hdr_len]` and return where
    /// its payload is in `frame`. The TCP checksum is complete: the
    /// payload is summed here (the one pass over the bytes this costs).
    pub fn segment(&self, frame: &[u8], i: usize, out: &mut [u8]) -> Range<usize> {
        let l = &self.layout;
        let start = (l.hdr_len + i * self.mss).min(self.len);
        let end = (start + self.mss).min(self.len);
        let h = &mut out[..l.hdr_len];
        h.copy_from_slice(&frame[..l.hdr_len]);
        let last = end == self.len;
        let plen = end - start;
        l.set_ip_len(h, plen);
        if !l.v6 {
            let id = crate::be16(h, l.l3 + 4).wrapping_add(i as u16);
            crate::put16(h, l.l3 + 4, id);
            // The IPv4 checksum again, now that the ID changed.
            let ip = &mut h[l.l3..l.l4];
            crate::put16(ip, 10, 0);
            let c = checksum::checksum(ip);
            crate::put16(ip, 10, c);
        }
        let tcp = l.l4;
        let seq = crate::be32(h, tcp + 4).wrapping_add((i * self.mss) as u32);
        crate::put32(h, tcp + 4, seq);
        let mut flags = h[tcp + 13];
        if !last {
            flags &= !(TCP_FIN | TCP_PSH);
        }
        if i > 0 {
            flags &= !TCP_CWR;
        }
        h[tcp + 13] = flags;
        crate::put16(h, tcp + 16, 0);
        let mut acc = l.pseudo(h, l.hdr_len - tcp + plen);
        acc = checksum::sum(acc, &h[tcp..]);
        acc = checksum::sum(acc, &frame[start..end]);
        crate::put16(h, tcp + 16, checksum::finish(acc));
        start..end
    }

    /// Segment `i` as a whole frame, written into `out` (cleared first).
    pub fn segment_into(&self, frame: &[u8], i: usize, out: &mut Vec<u8>) {
        let mut h = [0u8; MAX_HDR];
        let r = self.segment(frame, i, &mut h);
        out.clear();
        out.extend_from_slice(&h[..self.layout.hdr_len]);
        out.extend_from_slice(&frame[r]);
    }
}

/// A frame joined from several segments, ready for a TAP.
#[derive(Debug)]
pub struct Coalesced<'a> {
    pub frame: &'a [u8],
    /// The payload of each joined segment but the last (the `gso_size`).
    pub mss: u16,
    pub segments: usize,
    pub v6: bool,
    pub hdr_len: usize,
}

/// Joins consecutive TCP segments of one flow (software GRO).
#[derive(Debug)]
pub struct Coalescer {
    /// `head` bytes of headroom, then the frame being built.
    buf: Vec<u8>,
    head: usize,
    layout: Option<TcpLayout>,
    mss: usize,
    next_seq: u32,
    segs: usize,
    /// One's-complement sum of every joined payload, from the checksums.
    payload_sum: u64,
    /// A short or PSH segment ends the run.
    closed: bool,
    /// Any joined segment had PSH.
    psh: bool,
}

impl Default for Coalescer {
    fn default() -> Coalescer {
        Coalescer::new()
    }
}

/// The largest frame a TAP takes whole.
const MAX_JOINED: usize = 65535;

impl Coalescer {
    pub fn new() -> Coalescer {
        Coalescer::with_headroom(0)
    }

    /// A coalescer whose frames have `head` bytes of room in front, so
    /// that the caller can push headers without copying the frame.
    pub fn with_headroom(head: usize) -> Coalescer {
        Coalescer {
            buf: Vec::with_capacity(head + MAX_JOINED + 14 + 8),
            head,
            layout: None,
            mss: 0,
            next_seq: 0,
            segs: 0,
            payload_sum: 0,
            closed: false,
            psh: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.segs == 0
    }

    /// How many segments are waiting.
    pub fn segments(&self) -> usize {
        self.segs
    }

    /// Join `seg` (a whole Ethernet frame) to the frame being built, or
    /// start one with it. Returns false, changing nothing, if it cannot
    /// join: the caller finishes the frame being built and pushes again
    /// (or sends `seg` as it is if it still cannot start one).
    pub fn push(&mut self, seg: &[u8]) -> bool {
        let Ok(l) = TcpLayout::parse(seg) else {
            return false;
        };
        let plen = seg.len() - l.hdr_len;
        let Some(ip_plen) = ip_payload_len(seg, &l) else {
            return false;
        };
        // Ethernet padding or a length that disagrees: not a plain segment.
        if ip_plen != seg.len() - l.l4 {
            return false;
        }
        let flags = seg[l.l4 + 13];
        if plen == 0 || flags & (TCP_SYN | TCP_FIN | TCP_RST | TCP_URG | TCP_CWR | TCP_ECE) != 0 {
            return false;
        }
        if flags & TCP_ACK == 0 {
            return false;
        }
        let seq = crate::be32(seg, l.l4 + 4);
        let payload_sum = segment_payload_sum(seg, &l);
        match self.layout {
            None => {
                self.buf.clear();
                self.buf.resize(self.head, 0);
                self.buf.extend_from_slice(seg);
                self.layout = Some(l);
                self.mss = plen;
                self.next_seq = seq.wrapping_add(plen as u32);
                self.segs = 1;
                self.payload_sum = payload_sum;
                self.psh = flags & TCP_PSH != 0;
                self.closed = self.psh;
                true
            }
            Some(cur) => {
                if self.closed
                    || cur != l
                    || seq != self.next_seq
                    || plen > self.mss
                    || self.buf.len() - self.head - cur.l3 + plen > MAX_JOINED
                    || !same_flow_headers(&self.buf[self.head..], seg, &l)
                {
                    return false;
                }
                // A payload that starts at an odd offset of the joined
                // bytes adds its sum byte-swapped (RFC 1071 § 2(B)).
                let at = self.buf.len() - self.head - l.hdr_len;
                let sum = if at % 2 == 1 {
                    checksum::fold(payload_sum).swap_bytes() as u64
                } else {
                    payload_sum
                };
                self.buf.extend_from_slice(&seg[l.hdr_len..]);
                self.next_seq = seq.wrapping_add(plen as u32);
                self.segs += 1;
                self.payload_sum = add(self.payload_sum, sum);
                if flags & TCP_PSH != 0 {
                    self.psh = true;
                    self.closed = true;
                }
                if plen < self.mss {
                    self.closed = true;
                }
                true
            }
        }
    }

    /// Finish the frame being built: IP length and checksum, TCP flags and
    /// the checksum of the joined bytes. `None` if nothing is waiting. A
    /// single segment comes back as it arrived.
    pub fn finish(&mut self) -> Option<Coalesced<'_>> {
        let l = self.layout.take()?;
        let segs = std::mem::take(&mut self.segs);
        let f = &mut self.buf[self.head..];
        if segs > 1 {
            let plen = f.len() - l.hdr_len;
            l.set_ip_len(f, plen);
            let tcp = l.l4;
            if self.psh {
                f[tcp + 13] |= TCP_PSH;
            }
            crate::put16(f, tcp + 16, 0);
            let mut acc = l.pseudo(f, l.hdr_len - tcp + plen);
            acc = checksum::sum(acc, &f[tcp..l.hdr_len]);
            acc = add(acc, self.payload_sum);
            crate::put16(f, tcp + 16, checksum::finish(acc));
        }
        Some(Coalesced {
            frame: &self.buf[self.head..],
            mss: self.mss as u16,
            segments: segs,
            v6: l.v6,
            hdr_len: l.hdr_len,
        })
    }
}

impl Coalescer {
    /// Lend the buffer of the frame `finish` returned (its headroom
    /// first): the caller works on it in place and gives it back with
    /// [`Coalescer::restore`] before the next `push`.
    pub fn take_buffer(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    pub fn restore(&mut self, buf: Vec<u8>) {
        self.buf = buf;
    }

    pub fn headroom(&self) -> usize {
        self.head
    }
}

fn add(a: u64, b: u64) -> u64 {
    let (s, c) = a.overflowing_add(b);
    s + c as u64
}

fn ip_payload_len(seg: &[u8], l: &TcpLayout) -> Option<usize> {
    if l.v6 {
        Some(crate::be16(seg, l.l3 + 4) as usize)
    } else {
        (crate::be16(seg, l.l3 + 2) as usize).checked_sub(l.l4 - l.l3)
    }
}

/// The one's-complement sum of a segment's TCP payload, read off its
/// checksum: field = ~(pseudo + header + payload), so payload = ~field -
/// pseudo - header (one's-complement subtraction adds the complement).
fn segment_payload_sum(seg: &[u8], l: &TcpLayout) -> u64 {
    let tcp = l.l4;
    let field = crate::be16(seg, tcp + 16);
    let tcp_len = seg.len() - tcp;
    let pseudo = checksum::fold(l.pseudo(seg, tcp_len));
    // The header's sum with the checksum field zeroed.
    let mut h = [0u8; 60];
    let hl = l.hdr_len - tcp;
    h[..hl].copy_from_slice(&seg[tcp..l.hdr_len]);
    h[16] = 0;
    h[17] = 0;
    let hsum = checksum::fold(checksum::sum(0, &h[..hl]));
    let total = !field; // fold(pseudo + header + payload)
                        // payload = total - pseudo - header, in one's-complement arithmetic.
    checksum::fold(add(add(total as u64, (!pseudo) as u64), (!hsum) as u64)) as u64
}

/// Do two segments belong to one flow and differ only where consecutive
/// segments may (IP length, ID and checksum; TCP sequence, flags, window
/// and checksum)?
fn same_flow_headers(a: &[u8], b: &[u8], l: &TcpLayout) -> bool {
    if a[..l.l3] != b[..l.l3] {
        return false;
    }
    let (ia, ib) = (&a[l.l3..l.l4], &b[l.l3..l.l4]);
    let ip_same = if l.v6 {
        // Version/class/flow label, next header, hop limit, addresses.
        ia[..4] == ib[..4] && ia[6..] == ib[6..]
    } else {
        // TOS; flags and fragment offset; TTL and protocol; addresses and options.
        ia[0..2] == ib[0..2] && ia[6..10] == ib[6..10] && ia[12..] == ib[12..]
    };
    let (ta, tb) = (&a[l.l4..l.hdr_len], &b[l.l4..l.hdr_len]);
    // Ports; acknowledgement; data offset; urgent pointer and options.
    ip_same && ta[0..4] == tb[0..4] && ta[8..13] == tb[8..13] && ta[18..] == tb[18..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An Ethernet/IPv4/TCP frame with timestamps-sized options and
    /// `payload`, checksums complete.
    fn tcp4(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 32];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = 14;
        f[ip] = 0x45;
        crate::put16(&mut f, ip + 2, (20 + 32 + payload.len()) as u16);
        crate::put16(&mut f, ip + 4, 0x1234);
        f[ip + 6] = 0x40;
        f[ip + 8] = 64;
        f[ip + 9] = 6;
        f[ip + 12..ip + 16].copy_from_slice(&[10, 0, 0, 1]);
        f[ip + 16..ip + 20].copy_from_slice(&[10, 0, 0, 2]);
        let c = checksum::checksum(&f[ip..ip + 20]);
        crate::put16(&mut f, ip + 10, c);
        let t = 34;
        crate::put16(&mut f, t, 40000);
        crate::put16(&mut f, t + 2, 5201);
        crate::put32(&mut f, t + 4, seq);
        crate::put32(&mut f, t + 8, 777);
        f[t + 12] = 8 << 4;
        f[t + 13] = flags;
        crate::put16(&mut f, t + 14, 502);
        f[t + 20..t + 32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7]);
        f.extend_from_slice(payload);
        let tcp_len = f.len() - t;
        let mut acc = checksum::pseudo_v4([10, 0, 0, 1], [10, 0, 0, 2], 6, tcp_len as u16);
        acc = checksum::sum(acc, &f[t..]);
        crate::put16(&mut f, t + 16, checksum::finish(acc));
        f
    }

    fn tcp_ok(f: &[u8]) -> bool {
        let l = TcpLayout::parse(f).unwrap();
        let tcp_len = f.len() - l.l4;
        let acc = l.pseudo(f, tcp_len);
        checksum::fold(checksum::sum(acc, &f[l.l4..])) == 0xffff && checksum::verify(&f[l.l3..l.l4])
    }

    #[test]
    fn segments_carry_their_own_headers() {
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        let sup = tcp4(1000, TCP_ACK | TCP_PSH, &payload);
        let s = TcpSuper::parse(&sup, 1400).unwrap();
        assert_eq!(s.segments(), 3);
        let mut out = Vec::new();
        let mut joined = Vec::new();
        for i in 0..3 {
            s.segment_into(&sup, i, &mut out);
            assert!(tcp_ok(&out), "segment {i} checksums");
            let seq = crate::be32(&out, 34 + 4);
            assert_eq!(seq, 1000 + 1400 * i as u32);
            assert_eq!(out[34 + 13] & TCP_PSH != 0, i == 2, "PSH only on the last");
            assert_eq!(crate::be16(&out, 14 + 4), 0x1234 + i as u16);
            joined.extend_from_slice(&out[66..]);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn coalescing_undoes_segmentation() {
        let payload: Vec<u8> = (0..5000u32).map(|i| (i * 13 + 5) as u8).collect();
        let whole = tcp4(7, TCP_ACK | TCP_PSH, &payload);
        let s = TcpSuper::parse(&whole, 1448).unwrap();
        let mut c = Coalescer::new();
        let mut out = Vec::new();
        for i in 0..s.segments() {
            s.segment_into(&whole, i, &mut out);
            assert!(c.push(&out));
        }
        let j = c.finish().unwrap();
        assert_eq!(j.segments, 4);
        assert_eq!(j.mss, 1448);
        assert!(
            tcp_ok(j.frame),
            "joined checksum is that of the joined bytes"
        );
        // Identical to the super-frame with complete checksums except the IP ID.
        assert_eq!(&j.frame[66..], &payload[..]);
        assert_eq!(j.frame.len(), whole.len());
        assert!(c.is_empty());
    }

    #[test]
    fn a_damaged_segment_makes_the_joined_checksum_wrong() {
        let payload = vec![0x5au8; 4000];
        let whole = tcp4(1, TCP_ACK, &payload);
        let s = TcpSuper::parse(&whole, 1000).unwrap();
        let mut c = Coalescer::new();
        let mut out = Vec::new();
        for i in 0..s.segments() {
            s.segment_into(&whole, i, &mut out);
            if i == 2 {
                out[100] ^= 0x10;
            }
            assert!(c.push(&out));
        }
        assert!(!tcp_ok(c.finish().unwrap().frame));
    }

    #[test]
    fn what_does_not_join() {
        let a = tcp4(100, TCP_ACK, &[1; 100]);
        let mut c = Coalescer::new();
        assert!(c.push(&a));
        assert!(!c.push(&tcp4(999, TCP_ACK, &[1; 100])), "gap in sequence");
        assert!(!c.push(&tcp4(200, TCP_ACK | TCP_FIN, &[1; 100])), "FIN");
        assert!(
            !c.push(&tcp4(200, TCP_ACK, &[1; 200])),
            "longer than the first"
        );
        let mut other = tcp4(200, TCP_ACK, &[1; 100]);
        other[34] ^= 1; // source port
        assert!(!c.push(&other), "other flow");
        assert!(c.push(&tcp4(200, TCP_ACK, &[1; 50])), "short one joins...");
        assert!(
            !c.push(&tcp4(250, TCP_ACK, &[1; 50])),
            "...and ends the run"
        );
        assert_eq!(c.finish().unwrap().segments, 2);
        assert!(!c.push(&tcp4(5, TCP_ACK, &[])), "pure ACK");
        assert!(!c.push(&tcp4(5, TCP_SYN, &[])), "SYN");
        assert!(c.finish().is_none());
    }

    #[test]
    fn not_tcp_is_refused() {
        let mut f = tcp4(1, TCP_ACK, &[0; 10]);
        f[14 + 9] = 17;
        assert_eq!(TcpSuper::parse(&f, 100).unwrap_err(), "gso_not_tcp");
        assert!(TcpSuper::parse(&f[..20], 100).is_err());
        let f = tcp4(1, TCP_ACK, &[0; 10]);
        assert_eq!(TcpSuper::parse(&f, 0).unwrap_err(), "gso_size_zero");
    }

    proptest! {
        #[test]
        fn split_then_join_is_lossless(len in 1usize..20000, mss in 100u16..9000, seq in any::<u32>()) {
            let payload: Vec<u8> = (0..len).map(|i| (i * 31 + len) as u8).collect();
            let whole = tcp4(seq, TCP_ACK, &payload);
            let s = TcpSuper::parse(&whole, mss).unwrap();
            let mut c = Coalescer::new();
            let mut out = Vec::new();
            for i in 0..s.segments() {
                s.segment_into(&whole, i, &mut out);
                prop_assert!(tcp_ok(&out));
                prop_assert!(out.len() - 66 <= mss as usize);
                prop_assert!(c.push(&out));
            }
            let j = c.finish().unwrap();
            prop_assert!(tcp_ok(j.frame));
            prop_assert_eq!(&j.frame[66..], &payload[..]);
        }

        #[test]
        fn any_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300), mss in any::<u16>()) {
            if let Ok(s) = TcpSuper::parse(&data, mss) {
                let mut out = Vec::new();
                for i in 0..s.segments().min(8) {
                    s.segment_into(&data, i, &mut out);
                }
            }
            let mut c = Coalescer::new();
            c.push(&data);
            c.push(&data);
            let _ = c.finish();
        }
    }
}
