//! The switch's counters, whichever datapath moved the packets: per port,
//! drops by reason, and their sum over workers (`tunlab ctl stats`).

use std::collections::HashMap;

/// Per-port counters (`tunlab ctl stats` shows them).
#[derive(Debug, Clone, Copy, Default)]
pub struct PortStats {
    /// Packets as the wire carries them: a super-frame counts its segments.
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    /// Frames the slow path read and wrote, a super-frame once (fewer
    /// than the packets when super-frames crossed whole or were joined).
    pub rx_frames: u64,
    pub tx_frames: u64,
}

/// One port's counters at one moment.
#[derive(Debug, Clone)]
pub struct PortSnapshot {
    pub name: String,
    pub ofport: u32,
    pub kind: &'static str,
    pub stats: PortStats,
    /// Frames received per TAP queue (this worker's queues).
    pub queue_rx: Vec<u64>,
}

/// A node's (or one worker's) counters at one moment.
#[derive(Debug, Clone, Default)]
pub struct NodeStats {
    pub ports: Vec<PortSnapshot>,
    pub drops: HashMap<&'static str, u64>,
    pub outer_fragmented: HashMap<&'static str, u64>,
    /// Exact-match cache hits and misses.
    pub cache: (u64, u64),
}

impl NodeStats {
    /// The sum of the workers' counters, worker by worker in order. A TAP
    /// queue's number is `worker + workers * i` for a worker's i-th queue
    /// (as the userspace datapath opens them), so the per-queue counts are dealt
    /// back in that order.
    pub fn sum(workers: &[NodeStats]) -> NodeStats {
        let Some(first) = workers.first() else {
            return NodeStats::default();
        };
        let mut total = NodeStats {
            ports: first.ports.clone(),
            ..NodeStats::default()
        };
        for (pi, p) in total.ports.iter_mut().enumerate() {
            p.stats = PortStats::default();
            let per: Vec<&[u64]> = workers
                .iter()
                .map(|w| w.ports.get(pi).map_or(&[][..], |q| &q.queue_rx[..]))
                .collect();
            let n: usize = per.iter().map(|q| q.len()).sum();
            p.queue_rx = (0..n)
                .map(|j| per[j % per.len()].get(j / per.len()).copied().unwrap_or(0))
                .collect();
        }
        for w in workers {
            for (pi, p) in w.ports.iter().enumerate() {
                if let Some(t) = total.ports.get_mut(pi) {
                    t.stats.rx_packets += p.stats.rx_packets;
                    t.stats.rx_bytes += p.stats.rx_bytes;
                    t.stats.tx_packets += p.stats.tx_packets;
                    t.stats.tx_bytes += p.stats.tx_bytes;
                    t.stats.tx_errors += p.stats.tx_errors;
                    t.stats.rx_frames += p.stats.rx_frames;
                    t.stats.tx_frames += p.stats.tx_frames;
                }
            }
            for (k, v) in &w.drops {
                *total.drops.entry(k).or_insert(0) += v;
            }
            for (k, v) in &w.outer_fragmented {
                *total.outer_fragmented.entry(k).or_insert(0) += v;
            }
            total.cache.0 += w.cache.0;
            total.cache.1 += w.cache.1;
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_counters_are_summed_and_queues_dealt_back() {
        let worker = |q: Vec<u64>, rx: u64, drop: u64| NodeStats {
            ports: vec![PortSnapshot {
                name: "tap0".into(),
                ofport: 1,
                kind: "tap",
                stats: PortStats {
                    rx_packets: rx,
                    ..PortStats::default()
                },
                queue_rx: q,
            }],
            drops: [("too_big", drop)].into_iter().collect(),
            outer_fragmented: HashMap::new(),
            cache: (rx, 1),
        };
        // Three queues over two workers: worker 0 holds queues 0 and 2.
        let t = NodeStats::sum(&[worker(vec![10, 30], 40, 1), worker(vec![20], 20, 2)]);
        assert_eq!(t.ports[0].queue_rx, vec![10, 20, 30]);
        assert_eq!(t.ports[0].stats.rx_packets, 60);
        assert_eq!(t.drops["too_big"], 3);
        assert_eq!(t.cache, (60, 2));
        assert!(NodeStats::sum(&[]).ports.is_empty());
    }
}
