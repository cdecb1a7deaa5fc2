//! The signature every sent frame carries in its last 16 bytes, so the
//! receiver can count per flow, find losses, duplicates and reordering, and
//! measure latency, whatever tunnels the frame went through on the way.
//!
//! ```text
//!  0        2        4                 8                12               16
//! ┌────────┬────────┬─────────────────┬─────────────────┬────────────────┐
//! │ magic  │ fix-up │ stream:8 flow:24│ sequence        │ tx time (ns,   │
//! │ 0x7e4c │        │                 │ (per stream)    │ low 32 bits)   │
//! └────────┴────────┴─────────────────┴─────────────────┴────────────────┘
//! ```
//!
//! The fix-up word makes the signature *checksum-neutral*: the one's
//! complement sum of the 16 bytes equals that of the bytes it replaces. So
//! every checksum over the payload (inner UDP/TCP, an outer UDP checksum,
//! GRE's, STT's) stays right without being touched, at any byte alignment
//! (a byte-swapped sum is equal exactly when the sum is). A stream is one
//! sending thread; the sequence counts that thread's frames.

/// Bytes of the signature at the end of a frame.
pub const LEN: usize = 16;
/// The first two bytes of every signature.
pub const MAGIC: u16 = 0x7e4c;
/// Flows a signature can name.
pub const MAX_FLOW: u32 = (1 << 24) - 1;

/// What a signature says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    pub stream: u8,
    pub flow: u32,
    pub seq: u32,
    /// Transmit time: the low 32 bits of `CLOCK_REALTIME` in ns (wraps
    /// every 4.29 s; latencies are differences modulo 2^32).
    pub ts: u32,
}

/// One's complement sum of big-endian 16-bit words, folded.
fn sum16(b: &[u8]) -> u32 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

/// The sum of the 16 bytes a signature replaces: kept per template.
pub fn tail_sum(frame: &[u8]) -> u16 {
    sum16(&frame[frame.len().saturating_sub(LEN)..]) as u16
}

impl Signature {
    /// Write the signature over the last 16 bytes of `frame`, whose old
    /// contents summed to `old_sum` ([`tail_sum`]). `frame` must be at
    /// least 16 bytes.
    #[inline]
    pub fn write(&self, frame: &mut [u8], old_sum: u16) {
        let at = frame.len() - LEN;
        let t = &mut frame[at..];
        t[0..2].copy_from_slice(&MAGIC.to_be_bytes());
        t[2..4].copy_from_slice(&[0, 0]);
        let id = (u32::from(self.stream) << 24) | (self.flow & MAX_FLOW);
        t[4..8].copy_from_slice(&id.to_be_bytes());
        t[8..12].copy_from_slice(&self.seq.to_be_bytes());
        t[12..16].copy_from_slice(&self.ts.to_be_bytes());
        // Choose fix so that sum(new) ≡ old_sum: fix = old_sum - sum(rest)
        // in one's complement arithmetic.
        let rest = {
            let mut s = u32::from(MAGIC)
                + (id >> 16)
                + (id & 0xffff)
                + (self.seq >> 16)
                + (self.seq & 0xffff)
                + (self.ts >> 16)
                + (self.ts & 0xffff);
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            s
        };
        let mut fix = u32::from(old_sum) + (!rest & 0xffff);
        while fix > 0xffff {
            fix = (fix & 0xffff) + (fix >> 16);
        }
        t[2..4].copy_from_slice(&(fix as u16).to_be_bytes());
    }

    /// Read the signature at the end of `frame`, if it has one.
    #[inline]
    pub fn read(frame: &[u8]) -> Option<Signature> {
        let at = frame.len().checked_sub(LEN)?;
        let t = &frame[at..];
        if u16::from_be_bytes([t[0], t[1]]) != MAGIC {
            return None;
        }
        let word = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
        let id = word(4);
        Some(Signature {
            stream: (id >> 24) as u8,
            flow: id & MAX_FLOW,
            seq: word(8),
            ts: word(12),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One's complement sums are equal when they fold to the same value or
    /// are the two zeros (0x0000 and 0xffff).
    fn same(a: u32, b: u32) -> bool {
        let z = |x: u32| if x == 0xffff { 0 } else { x };
        z(a) == z(b)
    }

    #[test]
    fn reads_back_what_was_written() {
        let mut f = vec![0xa5u8; 60];
        let s = Signature {
            stream: 3,
            flow: 0x12_3456,
            seq: 0xdead_beef,
            ts: 7,
        };
        let old = tail_sum(&f);
        s.write(&mut f, old);
        assert_eq!(Signature::read(&f), Some(s));
        assert_eq!(&f[..44], &[0xa5; 44][..], "bytes before the tail untouched");
    }

    #[test]
    fn frames_without_the_magic_are_not_ours() {
        assert_eq!(Signature::read(&[0u8; 60]), None);
        assert_eq!(Signature::read(&[0x7e, 0x4c]), None, "too short");
    }

    proptest! {
        #[test]
        fn the_signature_leaves_every_checksum_as_it_was(
            mut f in proptest::collection::vec(any::<u8>(), 16..200),
            skip in 0usize..16,
            stream: u8, flow in 0u32..=MAX_FLOW, seq: u32, ts: u32,
        ) {
            // A checksum may start at any byte before the tail: even and
            // odd alignments both keep their sum.
            let skip = skip.min(f.len() - LEN);
            let before = sum16(&f[skip..]);
            let s = Signature { stream, flow, seq, ts };
            let old = tail_sum(&f);
            s.write(&mut f, old);
            prop_assert!(same(sum16(&f[skip..]), before));
            prop_assert_eq!(Signature::read(&f), Some(s));
        }
    }
}
