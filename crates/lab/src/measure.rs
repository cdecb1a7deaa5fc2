//! One sample of one test on one variant, watched by the noise guard: a
//! sample the guard marks is taken again (up to [`RETAKES`] times, while
//! the budget allows, and while the noise looks passing rather than
//! lasting); the marked ones are kept aside for the report.

use crate::bed::Station;
use crate::guard::Guard;
use crate::sample::{Kind, Sample, Test};

/// How often a marked sample is taken again at most.
pub const RETAKES: usize = 2;

/// A sample, and those the guard marked before it.
#[derive(Debug, Clone)]
pub struct Taken {
    pub kept: Sample,
    pub retaken: Vec<Sample>,
}

/// How to take one sample.
#[derive(Debug, Clone, Copy)]
pub struct How {
    pub seconds: u32,
    pub cpus: Option<[u16; 2]>,
    pub round: usize,
}

/// Numbers the run's samples in the order taken.
static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One sample of `test` on `st`; `may_retake()` is asked before a marked
/// sample is taken again. The error is the tool's.
pub fn take(
    st: &Station,
    test: &Test,
    how: How,
    guard: &mut Guard,
    mut may_retake: impl FnMut() -> bool,
) -> Result<Taken, String> {
    let mut retaken = Vec::new();
    loop {
        let (before, idle) = guard.start();
        let mut s = once(st, test, how)?;
        let noise = guard.finish(&before, idle);
        let marked = noise.marked.is_some();
        s.round = Some(how.round);
        s.seq = Some(SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        s.noise = Some(noise);
        if marked && retaken.len() < RETAKES && !guard.persistent() && may_retake() {
            retaken.push(s);
            continue;
        }
        return Ok(Taken { kept: s, retaken });
    }
}

fn once(st: &Station, test: &Test, how: How) -> Result<Sample, String> {
    let peers = st.peers(how.cpus);
    let meter = st.running.meter();
    match test.kind {
        Kind::FirstPacket => {
            crate::first_packet::run_sample(peers, test, how.seconds, &meter, &|| {
                st.running.flush()
            })
        }
        _ => crate::traffic::run_sample(peers, test, how.seconds, &meter),
    }
}
