//! Receive-side accounting from the signatures: frames per flow, duplicates
//! and reordering per sending stream (RFC 4737's definition: a frame is
//! reordered when a later-sent frame of its stream arrived before it), and
//! one-way latency. Pure: the receive loop feeds it frames.

use crate::sig::Signature;
use serde::Serialize;

/// How far behind the newest frame of a stream duplicates are still found
/// (a 512 KiB bitmap per stream); an older frame counts as reordered.
const WINDOW: u32 = 1 << 22;
/// Latencies above this (ns) are not latencies: a clock step or a
/// signature from a frame sent before this run.
const MAX_LATENCY_NS: u32 = 1 << 31;

/// One sending stream's sequence numbers: a bitmap of the last
/// [`WINDOW`] of them, bit `seq % WINDOW`.
#[derive(Debug, Default)]
struct Stream {
    seen: Vec<u64>,
    /// One past the highest sequence seen.
    next: u32,
}

enum Seen {
    New,
    Late,
    Duplicate,
}

impl Stream {
    fn bit(seq: u32) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    fn mark(&mut self, seq: u32) -> Seen {
        if self.seen.is_empty() {
            self.seen = vec![0; (WINDOW / 64) as usize];
        }
        if seq >= self.next {
            // Slots between the newest and this one held sequences a
            // window older: clear them.
            if seq - self.next >= WINDOW {
                self.seen.fill(0);
            } else {
                for s in self.next..seq {
                    let (w, b) = Self::bit(s);
                    self.seen[w] &= !b;
                }
            }
            let (w, b) = Self::bit(seq);
            self.seen[w] |= b;
            self.next = seq.saturating_add(1);
            return Seen::New;
        }
        if self.next - seq > WINDOW {
            return Seen::Late;
        }
        let (w, b) = Self::bit(seq);
        if self.seen[w] & b != 0 {
            return Seen::Duplicate;
        }
        self.seen[w] |= b;
        Seen::Late
    }
}

/// Latency histogram: 16 linear sub-buckets per power of two, so every
/// figure is within 1/16 (6 %) of the truth, from 1 ns to 2 s.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    n: u64,
    sum: u128,
    min: u32,
    max: u32,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: vec![0; 32 * 16],
            n: 0,
            sum: 0,
            min: u32::MAX,
            max: 0,
        }
    }
}

fn bucket(ns: u32) -> usize {
    if ns < 16 {
        return ns as usize;
    }
    let exp = 31 - ns.leading_zeros() as usize; // >= 4
    let sub = ((ns >> (exp - 4)) & 15) as usize;
    (exp - 3) * 16 + sub
}

/// The lowest value of bucket `b`.
fn bucket_floor(b: usize) -> u64 {
    if b < 16 {
        return b as u64;
    }
    let exp = b / 16 + 3;
    let sub = (b % 16) as u64;
    (16 + sub) << (exp - 4)
}

impl Histogram {
    /// A histogram counted elsewhere (the XDP counter), in this one's
    /// buckets: `buckets` of them, `n` samples summing to `sum` ns.
    pub fn from_parts(buckets: &[u64], n: u64, sum: u64, min: u32, max: u32) -> Histogram {
        let mut h = Histogram::default();
        for (b, c) in h.buckets.iter_mut().zip(buckets) {
            *b = *c;
        }
        h.n = n;
        h.sum = u128::from(sum);
        h.min = if n == 0 { u32::MAX } else { min };
        h.max = max;
        h
    }

    pub fn record(&mut self, ns: u32) {
        self.buckets[bucket(ns)] += 1;
        self.n += 1;
        self.sum += u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// The `q` quantile (0..=1), as its bucket's lower edge.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (b, &c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= rank {
                return Some(bucket_floor(b).max(u64::from(self.min)));
            }
        }
        Some(u64::from(self.max))
    }

    pub fn summary(&self) -> Option<Latency> {
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(Latency {
            samples: self.n,
            min_us: us(u64::from(self.min)),
            mean_us: us((self.sum / u128::from(self.n.max(1))) as u64),
            p50_us: us(self.quantile(0.5)?),
            p99_us: us(self.quantile(0.99)?),
            p999_us: us(self.quantile(0.999)?),
            max_us: us(u64::from(self.max)),
        })
    }
}

/// One-way latency figures, microseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Latency {
    pub samples: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// What a receiver counted.
#[derive(Debug, Default)]
pub struct Counter {
    /// Frames with our signature, duplicates not counted.
    pub rx: u64,
    /// Their wire bytes, FCS included.
    pub rx_bytes: u64,
    pub dups: u64,
    pub reordered: u64,
    /// Frames without our signature (other traffic on the interface).
    pub foreign: u64,
    pub per_flow: Vec<u64>,
    streams: Vec<Stream>,
    pub latency: Histogram,
}

impl Counter {
    pub fn new(flows: u32, streams: usize) -> Counter {
        Counter {
            per_flow: vec![0; flows as usize],
            streams: (0..streams).map(|_| Stream::default()).collect(),
            ..Counter::default()
        }
    }

    /// Count one frame of `wire_len` bytes (FCS not included) received at
    /// `rx_ns` (`CLOCK_REALTIME`).
    #[inline]
    pub fn frame(&mut self, data: &[u8], wire_len: usize, rx_ns: u64) {
        let Some(s) = Signature::read(data) else {
            self.foreign += 1;
            return;
        };
        let (Some(st), Some(pf)) = (
            self.streams.get_mut(s.stream as usize),
            self.per_flow.get_mut(s.flow as usize),
        ) else {
            self.foreign += 1;
            return;
        };
        match st.mark(s.seq) {
            Seen::Duplicate => {
                self.dups += 1;
                return;
            }
            Seen::Late => self.reordered += 1,
            Seen::New => {}
        }
        self.rx += 1;
        self.rx_bytes += (wire_len + crate::build::FCS) as u64;
        *pf += 1;
        let lat = (rx_ns as u32).wrapping_sub(s.ts);
        if lat < MAX_LATENCY_NS {
            self.latency.record(lat);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stream: u8, flow: u32, seq: u32, ts: u32) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        Signature {
            stream,
            flow,
            seq,
            ts,
        }
        .write(&mut f, 0);
        f
    }

    #[test]
    fn counts_flows_duplicates_and_reordering() {
        let mut c = Counter::new(3, 2);
        for (stream, flow, seq) in [
            (0, 0, 0),
            (0, 1, 1),
            (0, 1, 1),
            (0, 2, 3),
            (0, 0, 2),
            (1, 2, 0),
        ] {
            c.frame(&frame(stream, flow, seq, 0), 60, 1000);
        }
        assert_eq!(c.rx, 5);
        assert_eq!(c.dups, 1);
        assert_eq!(c.reordered, 1, "seq 2 came after 3");
        assert_eq!(c.per_flow, [2, 1, 2]);
        assert_eq!(c.rx_bytes, 5 * 64);
        // Not ours: no signature, a stream or flow out of range.
        c.frame(&[0u8; 60], 60, 0);
        c.frame(&frame(2, 0, 0, 0), 60, 0);
        c.frame(&frame(0, 3, 9, 0), 60, 0);
        assert_eq!(c.foreign, 3);
        assert_eq!(c.rx, 5);
    }

    #[test]
    fn duplicates_are_found_within_the_window_and_memory_stays_bounded() {
        let mut c = Counter::new(1, 1);
        // A stale or foreign frame far ahead does not make the bitmap grow.
        c.frame(&frame(0, 0, u32::MAX - 1, 0), 60, 0);
        assert_eq!(c.streams[0].seen.len(), (WINDOW / 64) as usize);
        let mut c = Counter::new(1, 1);
        for seq in [0, 1, WINDOW + 5, 6, WINDOW + 5, 2] {
            c.frame(&frame(0, 0, seq, 0), 60, 0);
        }
        // seq 6 is within the window behind WINDOW + 5: late, not a dup;
        // WINDOW + 5 again: a duplicate; seq 2 is too old to tell: late.
        assert_eq!((c.rx, c.dups, c.reordered), (5, 1, 2));
    }

    #[test]
    fn latency_across_the_32_bit_wrap() {
        let mut c = Counter::new(1, 1);
        c.frame(&frame(0, 0, 0, u32::MAX - 99), 60, (1u64 << 32) + 900);
        let l = c.latency.summary().unwrap();
        assert_eq!(l.samples, 1);
        assert!((l.min_us - 1.0).abs() < 1e-9, "{l:?}");
        // A timestamp from "the future" is no latency.
        c.frame(&frame(0, 0, 1, 5000), 60, 1000);
        assert_eq!(c.latency.summary().unwrap().samples, 1);
    }

    proptest::proptest! {
        #[test]
        fn any_frame_is_counted_without_panic(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            magic: bool,
            rx_ns: u64,
        ) {
            let mut data = data;
            if magic && data.len() >= 16 {
                // Make it look like ours, with whatever stream, flow and seq.
                let at = data.len() - 16;
                data[at..at + 2].copy_from_slice(&crate::sig::MAGIC.to_be_bytes());
            }
            let mut c = Counter::new(4, 2);
            c.frame(&data, data.len(), rx_ns);
            c.frame(&data, data.len(), rx_ns);
            proptest::prop_assert_eq!(c.rx + c.dups + c.foreign, 2);
        }
    }

    #[test]
    fn quantiles_are_within_a_sixteenth() {
        let mut h = Histogram::default();
        for ns in 1..=100_000u32 {
            h.record(ns);
        }
        for (q, want) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.999, 99_900.0)] {
            let got = h.quantile(q).unwrap() as f64;
            assert!(
                got <= want && got >= want * (1.0 - 1.0 / 16.0),
                "q{q}: {got}"
            );
        }
        assert_eq!(h.quantile(0.0), Some(1));
        for ns in [0u32, 1, 15, 16, 17, 1000, u32::MAX] {
            assert!(bucket_floor(bucket(ns)) <= u64::from(ns), "{ns}");
            assert!(bucket(ns) < 32 * 16, "{ns}");
        }
    }
}
