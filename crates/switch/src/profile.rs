//! Where the packet loop's time goes, stage by stage (`tunlab ctl cycles
//! on`, then `tunlab ctl stats --cycles`).
//!
//! Off by default: each stage then costs one branch. On, every stage
//! reads the monotonic clock twice (about 20 ns each through the vDSO),
//! which is small beside a 64 KB super-frame but not beside a 64-byte
//! frame; the table says how long it has been on, and the time outside
//! the stages (poll, bookkeeping) shows as "other".

use std::time::Instant;

/// The stages of the loop, in the order a frame meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// System calls that bring frames in (TAP read, recvmmsg).
    Receive,
    /// Outer headers read and taken off; segments joined (GRO).
    Decap,
    /// Flow key extracted, classifier and actions.
    Classify,
    /// Tunnel headers written; super-frames cut (GSO headers, checksums).
    Encap,
    /// System calls that send (TAP write, sendmsg/sendmmsg).
    Transmit,
}

const STAGES: [Stage; 5] = [
    Stage::Receive,
    Stage::Decap,
    Stage::Classify,
    Stage::Encap,
    Stage::Transmit,
];

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Receive => "receive",
            Stage::Decap => "decap",
            Stage::Classify => "classify",
            Stage::Encap => "encap",
            Stage::Transmit => "transmit",
        }
    }
}

/// Time and frame counts per stage since profiling was turned on.
#[derive(Debug, Default)]
pub struct Profile {
    since: Option<Instant>,
    ns: [u64; 5],
    frames: [u64; 5],
}

impl Profile {
    pub fn on(&self) -> bool {
        self.since.is_some()
    }

    /// Start (again, from zero) or stop.
    pub fn set(&mut self, on: bool) {
        *self = Profile {
            since: on.then(Instant::now),
            ..Profile::default()
        };
    }

    /// A stage starts: the time, if profiling.
    #[inline]
    pub fn start(&self) -> Option<Instant> {
        self.since.map(|_| Instant::now())
    }

    /// A stage that began at `t` ended, having handled `frames` frames.
    #[inline]
    pub fn add(&mut self, stage: Stage, t: Option<Instant>, frames: u64) {
        if let Some(t) = t {
            let i = stage as usize;
            self.ns[i] += t.elapsed().as_nanos() as u64;
            self.frames[i] += frames;
        }
    }

    /// The table: per stage, frames, total time, ns per frame and share of
    /// the wall-clock time profiled.
    pub fn table(&self) -> String {
        let Some(since) = self.since else {
            return "cycles: off (turn on with `tunlab ctl cycles on`)\n".to_string();
        };
        let wall = since.elapsed().as_nanos().max(1) as u64;
        let mut s = format!(
            "cycles: on for {:.3} s\n{:<10} {:>12} {:>12} {:>10} {:>7}\n",
            wall as f64 / 1e9,
            "stage",
            "frames",
            "ms",
            "ns/frame",
            "% wall"
        );
        let mut staged = 0;
        for st in STAGES {
            let i = st as usize;
            staged += self.ns[i];
            let per = if self.frames[i] > 0 {
                format!("{:.1}", self.ns[i] as f64 / self.frames[i] as f64)
            } else {
                "-".to_string()
            };
            s.push_str(&format!(
                "{:<10} {:>12} {:>12.3} {:>10} {:>6.1}%\n",
                st.name(),
                self.frames[i],
                self.ns[i] as f64 / 1e6,
                per,
                100.0 * self.ns[i] as f64 / wall as f64
            ));
        }
        let other = wall.saturating_sub(staged);
        s.push_str(&format!(
            "{:<10} {:>12} {:>12.3} {:>10} {:>6.1}%  (poll, idle, bookkeeping)\n",
            "other",
            "",
            other as f64 / 1e6,
            "",
            100.0 * other as f64 / wall as f64
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_records_nothing_and_says_how_to_turn_it_on() {
        let mut p = Profile::default();
        let t = p.start();
        assert!(t.is_none());
        p.add(Stage::Classify, t, 5);
        assert!(p.table().contains("ctl cycles on"));
    }

    #[test]
    fn on_counts_frames_and_time_per_stage() {
        let mut p = Profile::default();
        p.set(true);
        let t = p.start();
        std::thread::sleep(std::time::Duration::from_millis(2));
        p.add(Stage::Encap, t, 4);
        assert_eq!(p.frames[Stage::Encap as usize], 4);
        assert!(p.ns[Stage::Encap as usize] >= 2_000_000);
        let table = p.table();
        let line = table.lines().find(|l| l.starts_with("encap")).unwrap();
        assert!(line.contains(" 4 "), "{line}");
        p.set(false);
        assert!(!p.on());
    }
}
