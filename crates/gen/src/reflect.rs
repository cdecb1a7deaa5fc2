//! The tenant side of a PVP test: every frame received on an interface
//! goes back out of it with its Ethernet addresses swapped, as testpmd's
//! `macswap` forwarding mode does in the TRex article's VM. A `TPACKET_V2`
//! RX ring in (each frame handed over as it arrives: no 1-ms block
//! hand-over in the latency), a TX ring out, a batch per poll. Or in XDP
//! ([`run_xdp`]), where the frames never leave the kernel.

use crate::send::Endpoint;
use std::sync::atomic::{AtomicBool, Ordering};
use tunlab_netio::{FrameRxRing, TxRing};

/// The largest frame reflected (jumbo frames included).
const MAX_FRAME: usize = 9018;

/// Reflect frames on `at` until `stop`; returns how many, and how many
/// it lost. `ready` is called once both rings are open (or with the
/// error if they are not).
pub fn run(
    at: &Endpoint,
    stop: &AtomicBool,
    ready: impl FnOnce(Result<(), String>),
) -> Result<Reflected, String> {
    let opened = at.enter().and_then(|_| {
        let rx = FrameRxRing::open(&at.ifname, MAX_FRAME, 2048)
            .map_err(|e| format!("reflector RX ring on {at}: {e}"))?;
        // Frames sent into a TAP hold their slot until the switch reads
        // them: a deep ring (2048 slots, the most 32 MiB of jumbo slots
        // hold) so that the reflector is not what drops.
        let tx = TxRing::open(&at.ifname, MAX_FRAME, 4096)
            .map_err(|e| format!("reflector TX ring on {at}: {e}"))?;
        Ok((rx, tx))
    });
    let (mut rx, mut tx) = announce(opened, ready)?;
    let mut reflected = 0u64;
    let mut tx_full = 0u64;
    let _ = rx.stats();
    while !stop.load(Ordering::Relaxed) {
        rx.poll(20, |f| {
            if f.data.len() < 14 {
                return;
            }
            let fill = |_: usize, area: &mut [u8]| {
                let n = f.data.len().min(area.len());
                area[..n].copy_from_slice(&f.data[..n]);
                // dst <-> src
                for i in 0..6 {
                    area.swap(i, i + 6);
                }
                n
            };
            // A full ring is flushed once; what still does not fit is
            // dropped, as a VM's full queue would.
            if tx.push(fill) || (tx.flush().is_ok() && tx.push(fill)) {
                reflected += 1;
            } else {
                tx_full += 1;
            }
        })
        .map_err(|e| format!("reflector on {at}: {e}"))?;
        tx.flush().map_err(|e| format!("reflector on {at}: {e}"))?;
    }
    let drops = rx.stats().map(|s| s.drops).unwrap_or(0);
    Ok(Reflected {
        frames: reflected,
        dropped: drops + tx_full,
    })
}

/// Tell `ready` whether the reflector could start, and pass the result on.
fn announce<T>(
    opened: Result<T, String>,
    ready: impl FnOnce(Result<(), String>),
) -> Result<T, String> {
    ready(opened.as_ref().map(|_| ()).map_err(String::clone));
    opened
}

/// What a reflector did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reflected {
    pub frames: u64,
    /// Frames it lost: its receive ring was full, or its transmit ring
    /// (the ring reflector; the XDP one loses none of its own).
    pub dropped: u64,
}

/// The same in XDP: frames are swapped and sent back by the kernel
/// (`crate::xdp::reflect`), none reaches user space. Attached in `at`'s
/// namespace until `stop`.
pub fn run_xdp(
    at: &Endpoint,
    stop: &AtomicBool,
    ready: impl FnOnce(Result<(), String>),
) -> Result<Reflected, String> {
    let attached = at.enter().and_then(|_| {
        crate::xdp::reflect::XdpReflector::attach(&at.ifname)
            .map_err(|e| format!("XDP reflector on {at}: {e}"))
    });
    let r = announce(attached, ready)?;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let frames = r
        .reflected()
        .map_err(|e| format!("XDP reflector on {at}: {e}"))?;
    // Detached here, in the namespace it was attached in.
    drop(r);
    Ok(Reflected { frames, dropped: 0 })
}
