//! The tenant side of a PVP test: every frame received on an interface
//! goes back out of it with its Ethernet addresses swapped, as testpmd's
//! `macswap` forwarding mode does in the TRex article's VM. A `TPACKET_V2`
//! RX ring in (each frame handed over as it arrives: no 1-ms block
//! hand-over in the latency), a TX ring out, a batch per poll.

use crate::send::Endpoint;
use std::sync::atomic::{AtomicBool, Ordering};
use tunlab_netio::{FrameRxRing, TxRing};

/// The largest frame reflected (jumbo frames included).
const MAX_FRAME: usize = 9018;

/// Reflect frames on `at` until `stop`; returns how many. `ready` is
/// called once both rings are open (or with the error if they are not).
pub fn run(
    at: &Endpoint,
    stop: &AtomicBool,
    ready: impl FnOnce(Result<(), String>),
) -> Result<u64, String> {
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
    let (mut rx, mut tx) = match opened {
        Ok(r) => {
            ready(Ok(()));
            r
        }
        Err(e) => {
            ready(Err(e.clone()));
            return Err(e);
        }
    };
    let mut reflected = 0u64;
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
            }
        })
        .map_err(|e| format!("reflector on {at}: {e}"))?;
        tx.flush().map_err(|e| format!("reflector on {at}: {e}"))?;
    }
    Ok(reflected)
}
