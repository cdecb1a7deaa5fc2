//! The frames a run sends, built once before it starts: per packet the
//! sender only copies a template into the ring and writes the signature
//! (Open vSwitch's build-once, patch-per-packet idea, applied to a
//! generator).
//!
//! Template `i` is packet `i` of the description: flow `i mod flows`, frame
//! size `i` of the size cycle (IMIX's 12). The pool holds enough templates
//! that cycling through it repeats the description's sequence exactly, and
//! a multiple of the sending threads so that thread `t` owns templates
//! `t, t+T, t+2T, ...`. `random` fields draw a new value per template; a
//! description with any holds at least [`RANDOM_TEMPLATES`] of them.

use crate::build::{Builder, Rng, Sizes, FCS};
use crate::sig;

/// The fewest templates of a description with `random` fields.
pub const RANDOM_TEMPLATES: u64 = 1024;
/// The most bytes of templates a run may hold.
pub const MAX_BYTES: u64 = 1 << 30;

/// One template.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    off: usize,
    len: u32,
    /// The flow it belongs to (what its signature names).
    pub flow: u32,
    /// The one's complement sum of its last 16 bytes (see [`sig`]).
    pub tail_sum: u16,
}

/// Every template of a run, in one allocation.
#[derive(Debug)]
pub struct Pool {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
    flows: u32,
    threads: usize,
    sizes: Sizes,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    a / gcd(a, b) * b
}

impl Pool {
    /// Build the templates of `b` for `threads` senders. Refused: frames
    /// without 16 bytes after their headers for the signature, and pools
    /// over [`MAX_BYTES`].
    pub fn new(b: &Builder, threads: usize, seed: u64) -> Result<Pool, String> {
        let flows = b.flows() as u64;
        let cycle = match b.sizes() {
            Sizes::Imix => crate::build::IMIX.iter().map(|x| x.1 as u64).sum(),
            _ => 1,
        };
        let mut n = lcm(lcm(flows, cycle), threads.max(1) as u64);
        if b.has_random() && n < RANDOM_TEMPLATES {
            n *= RANDOM_TEMPLATES.div_ceil(n);
        }
        // The smallest frame of the cycle decides whether the signature fits.
        for k in 0..cycle {
            let room = b.tail_room(k);
            if room < sig::LEN {
                let size = b.sizes().of(k).unwrap_or(b.min_frame());
                return Err(format!(
                    "a {size}-byte frame leaves {room} bytes after its headers; sending needs {} for the receive signature: use --size {} or more",
                    sig::LEN,
                    (size + sig::LEN - room).max(64)
                ));
            }
        }
        let avg = (0..cycle)
            .map(|k| b.sizes().of(k).unwrap_or(b.min_frame()) as u64)
            .sum::<u64>()
            / cycle;
        if n.saturating_mul(avg) > MAX_BYTES {
            return Err(format!(
                "{n} templates of {avg} bytes are more than {} MiB: narrow the ranges (flows: {flows})",
                MAX_BYTES >> 20
            ));
        }
        let mut bytes = Vec::with_capacity((n * avg) as usize);
        let mut entries = Vec::with_capacity(n as usize);
        let mut rng = Rng::new(seed);
        let mut one = Vec::new();
        for i in 0..n {
            b.build(i as u128, i, &mut rng, &mut one);
            entries.push(Entry {
                off: bytes.len(),
                len: one.len() as u32,
                flow: (i % flows) as u32,
                tail_sum: sig::tail_sum(&one),
            });
            bytes.extend_from_slice(&one);
        }
        Ok(Pool {
            bytes,
            entries,
            flows: flows as u32,
            threads: threads.max(1),
            sizes: b.sizes().clone(),
        })
    }

    /// The frame size as a table names it: bytes with FCS, or imix.
    pub fn size_name(&self) -> String {
        match self.sizes {
            Sizes::Imix => "imix".into(),
            _ => (self.get(0).1.len() + FCS).to_string(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn flows(&self) -> u32 {
        self.flows
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Template `i`: its entry and its bytes (FCS not included).
    #[inline]
    pub fn get(&self, i: usize) -> (&Entry, &[u8]) {
        let e = &self.entries[i];
        (e, &self.bytes[e.off..e.off + e.len as usize])
    }

    /// The largest template.
    pub fn max_len(&self) -> usize {
        self.entries
            .iter()
            .map(|e| e.len as usize)
            .max()
            .unwrap_or(0)
    }

    /// Templates thread `t` sends, in order: `t, t+T, ...`.
    pub fn of_thread(&self, t: usize) -> impl Iterator<Item = usize> + Clone + '_ {
        (t..self.entries.len()).step_by(self.threads)
    }

    /// Packets and bytes (FCS included) per flow when thread `t` sent
    /// `sent` packets, cycling through its templates from the first;
    /// added into `per_flow`.
    pub fn tx_per_flow(&self, t: usize, sent: u64, per_flow: &mut [u64]) {
        let mine: Vec<usize> = self.of_thread(t).collect();
        if mine.is_empty() {
            return;
        }
        let rounds = sent / mine.len() as u64;
        let rest = (sent % mine.len() as u64) as usize;
        for (k, &i) in mine.iter().enumerate() {
            let f = self.entries[i].flow as usize;
            per_flow[f] += rounds + u64::from(k < rest);
        }
    }

    /// Wire bytes (FCS included) of thread `t`'s first `sent` packets.
    pub fn tx_bytes(&self, t: usize, sent: u64) -> u64 {
        let mine: Vec<usize> = self.of_thread(t).collect();
        if mine.is_empty() {
            return 0;
        }
        let len = |i: &usize| (self.entries[*i].len as usize + FCS) as u64;
        let round: u64 = mine.iter().map(len).sum();
        let rest = (sent % mine.len() as u64) as usize;
        (sent / mine.len() as u64) * round + mine[..rest].iter().map(len).sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(desc: &str, sizes: Sizes, threads: usize) -> Result<Pool, String> {
        Pool::new(&crate::builder(desc, sizes)?, threads, 1)
    }

    #[test]
    fn the_pool_repeats_the_flows_in_order() {
        let p = pool(
            "Ether()/IP(src=10.0.0.1-10.0.0.3)/UDP(dport=[1,2])",
            Sizes::Fixed(64),
            1,
        )
        .unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(p.flows(), 6);
        let flows: Vec<u32> = (0..6).map(|i| p.get(i).0.flow).collect();
        assert_eq!(flows, [0, 1, 2, 3, 4, 5]);
        assert!((0..6).all(|i| p.get(i).1.len() == 60));
    }

    #[test]
    fn threads_and_imix_make_the_pool_a_common_multiple() {
        let p = pool("Ether()/IP(src=10.0.0.1-10.0.0.5)/UDP()", Sizes::Imix, 2).unwrap();
        // lcm(5 flows, 12 sizes, 2 threads)
        assert_eq!(p.len(), 60);
        let mine: Vec<usize> = p.of_thread(1).take(3).collect();
        assert_eq!(mine, [1, 3, 5]);
        let mut per_flow = vec![0; 5];
        p.tx_per_flow(0, 30, &mut per_flow);
        p.tx_per_flow(1, 30, &mut per_flow);
        assert_eq!(per_flow, [12; 5]);
        // One round of IMIX is 7x64 + 4x594 + 1518 bytes, five times over.
        assert_eq!(
            p.tx_bytes(0, 30) + p.tx_bytes(1, 30),
            5 * (7 * 64 + 4 * 594 + 1518)
        );
    }

    #[test]
    fn random_fields_get_many_templates() {
        let p = pool("Ether()/IP()/UDP(sport=random)", Sizes::Fixed(64), 1).unwrap();
        assert_eq!(p.len(), RANDOM_TEMPLATES as usize);
        let ports: std::collections::HashSet<&[u8]> =
            (0..p.len()).map(|i| &p.get(i).1[34..36]).collect();
        assert!(ports.len() > 900, "{} distinct ports", ports.len());
    }

    #[test]
    fn a_frame_without_room_for_the_signature_is_refused_with_the_size_that_fits() {
        // Ether/IP/UDP is 42 bytes: a 60-byte frame (64 with FCS) leaves 18.
        assert!(pool("Ether()/IP()/UDP()", Sizes::Fixed(64), 1).is_ok());
        let e = pool("Ether()/IP()/TCP()", Sizes::Fixed(64), 1).unwrap_err();
        assert!(
            e.contains("leaves 6 bytes") && e.contains("--size 74"),
            "{e}"
        );
        let e = pool("Ether()/IP()/UDP()", Sizes::Natural, 1).unwrap_err();
        assert!(e.contains("leaves 0 bytes"), "{e}");
    }
}
