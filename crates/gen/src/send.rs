//! Sending and counting: sender threads, each with its own AF_PACKET TX
//! ring (`--io packet`) or AF_XDP socket and UMEM (`--io xdp`, on queue
//! `thread`) on the transmit interface, copy templates from the [`Pool`]
//! into their frames and write the signature; a receiver thread reads an
//! RX ring on the receive interface and feeds a [`Counter`]. Each thread
//! enters its interface's network namespace before opening its socket.
//!
//! Frames are stamped once per [`BATCH`] frames as they are written:
//! latency includes the time a frame waits in the ring, as it would on a
//! NIC queue.

use crate::count::{Counter, Latency};
use crate::pool::Pool;
use crate::sig::Signature;
pub use crate::xdp::count::Hook;
use crate::xdp::count::XdpCounter;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tunlab_netio::cpu;
use tunlab_netio::{netns, RxRing, TxRing, XdpTx};

/// Frames stamped with one clock reading.
pub const BATCH: usize = 64;
/// Slots of each sender's TX ring: small enough that the ring stays in
/// cache (measured against trafgen: 4096 slots sent 20 % fewer frames
/// than 256).
const TX_SLOTS: usize = 256;
/// Frames of each sender's UMEM (and slots of its AF_XDP TX ring).
const XDP_FRAMES: usize = 2048;
/// How long the receiver keeps reading after the last frame was sent.
const DRAIN: Duration = Duration::from_millis(300);

/// An interface, in a network namespace or in tunlab's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    pub ifname: String,
    pub netns: Option<String>,
}

impl Endpoint {
    /// `IFNAME` or `IFNAME@NETNS`.
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        let (i, n) = match s.split_once('@') {
            Some((i, n)) => (i, Some(n)),
            None => (s, None),
        };
        if i.is_empty() || i.len() > 15 || n == Some("") {
            return Err(format!(
                "'{s}' is not an interface: IFNAME or IFNAME@NETNS (IFNAME up to 15 characters)"
            ));
        }
        Ok(Endpoint {
            ifname: i.to_string(),
            netns: n.map(str::to_string),
        })
    }

    /// Move the calling thread into the endpoint's namespace.
    pub fn enter(&self) -> Result<(), String> {
        match &self.netns {
            Some(n) => netns::enter(n).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.netns {
            Some(n) => write!(f, "{}@{n}", self.ifname),
            None => f.write_str(&self.ifname),
        }
    }
}

/// How fast to send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Max,
    /// Frames per second, all threads together.
    Pps(f64),
    /// Bits per second at layer 2 (frames with FCS), all threads together.
    Bps(f64),
}

impl Rate {
    /// `max`, `100000` or `100kpps` / `1.5Mpps` (frames/s), `500Mbps` /
    /// `2Gbps` (layer-2 bits/s, FCS included).
    pub fn parse(s: &str) -> Result<Rate, String> {
        let t = s.trim().to_ascii_lowercase();
        if t == "max" {
            return Ok(Rate::Max);
        }
        let bad = || {
            format!("--rate: '{s}' is not a rate: max, frames/s (100000, 250kpps, 1.5Mpps) or layer-2 bits/s (800Mbps, 2Gbps)")
        };
        let (num, unit) = t.split_at(t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len()));
        let v: f64 = num.trim().parse().map_err(|_| bad())?;
        if !(v.is_finite() && v > 0.0) {
            return Err(bad());
        }
        Ok(match unit {
            "" | "pps" => Rate::Pps(v),
            "kpps" => Rate::Pps(v * 1e3),
            "mpps" => Rate::Pps(v * 1e6),
            "bps" => Rate::Bps(v),
            "kbps" => Rate::Bps(v * 1e3),
            "mbps" => Rate::Bps(v * 1e6),
            "gbps" => Rate::Bps(v * 1e9),
            _ => return Err(bad()),
        })
    }

    /// Frames per second for frames of `avg_bytes` on average (FCS
    /// included); `None` for as fast as possible.
    pub fn pps(&self, avg_bytes: f64) -> Option<f64> {
        match *self {
            Rate::Max => None,
            Rate::Pps(p) => Some(p),
            Rate::Bps(b) => Some(b / (8.0 * avg_bytes)),
        }
    }
}

/// Which socket the senders send through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// AF_PACKET with a TX ring (TPACKET_V2, qdisc bypassed).
    Packet,
    /// AF_XDP: a UMEM per thread, zero-copy where the driver offers it.
    Xdp,
    /// AF_XDP if the interface takes it, AF_PACKET otherwise (saying why).
    Auto,
}

impl Io {
    pub fn parse(s: &str) -> Result<Io, String> {
        match s {
            "packet" => Ok(Io::Packet),
            "xdp" => Ok(Io::Xdp),
            "auto" => Ok(Io::Auto),
            _ => Err(format!("'{s}' is not an I/O mode (packet, xdp, auto)")),
        }
    }
}

/// A sender's transmit path.
enum Tx {
    Packet(TxRing),
    // Boxed: the AF_XDP socket's rings make it ten times the other's size.
    Xdp(Box<XdpTx>),
}

impl Tx {
    #[inline]
    fn push(&mut self, fill: impl FnOnce(usize, &mut [u8]) -> usize) -> bool {
        match self {
            Tx::Packet(r) => r.push(fill),
            Tx::Xdp(x) => x.push(fill),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Tx::Packet(r) => r.flush(),
            Tx::Xdp(x) => x.flush(),
        }
    }

    fn drain(&mut self, timeout: Duration) -> std::io::Result<bool> {
        match self {
            Tx::Packet(r) => r.drain(timeout),
            Tx::Xdp(x) => x.drain(timeout),
        }
    }

    fn slots(&self) -> usize {
        match self {
            Tx::Packet(r) => r.slots(),
            Tx::Xdp(x) => x.slots(),
        }
    }

    /// Sender thread `t`'s transmit path on `spec.tx` (already entered),
    /// and what it is, for the results: `packet`, `xdp (copy)`, or the
    /// fallback with its reason.
    fn open(spec: &Spec, t: usize, max_len: usize) -> Result<(Tx, String), String> {
        let packet = || {
            TxRing::open(&spec.tx.ifname, max_len, TX_SLOTS)
                .map(Tx::Packet)
                .map_err(|e| format!("TX ring on {}: {e}", spec.tx))
        };
        let xdp = || {
            XdpTx::open(&spec.tx.ifname, t as u32, max_len, XDP_FRAMES).map(|x| {
                let mode = format!("xdp ({})", x.mode().name());
                (Tx::Xdp(Box::new(x)), mode)
            })
        };
        match spec.io {
            Io::Packet => Ok((packet()?, "packet".into())),
            Io::Xdp => xdp().map_err(|e| format!("--io xdp on {}: {e}", spec.tx)),
            Io::Auto => match xdp() {
                Ok(x) => Ok(x),
                Err(e) => Ok((packet()?, format!("packet (AF_XDP refused: {e})"))),
            },
        }
    }
}

/// How long to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Time(Duration),
    Count(u64),
}

/// One run's settings.
#[derive(Debug, Clone)]
pub struct Spec {
    pub tx: Endpoint,
    /// Where to count; `None` sends only (the interface counters of the
    /// far end tell what arrived), as trafgen does.
    pub rx: Option<Endpoint>,
    /// Frames per second, all threads together; `None`: as fast as possible.
    pub rate_pps: Option<f64>,
    pub limit: Limit,
    pub io: Io,
    /// Where the in-kernel counter runs under `--io xdp`; `None`: the
    /// interface's cheaper hook ([`Hook::for_device`]).
    pub count_hook: Option<Hook>,
}

/// What one run measured. Rates are over the sending time; L1 counts 20
/// bytes per frame more than L2 (preamble, start delimiter, gap), L2
/// counts the FCS.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// How the frames left: `packet`, `xdp (copy)`, `xdp (zero-copy)`, or
    /// `packet (AF_XDP refused: why)` under `--io auto`.
    pub io: String,
    /// How they were counted: `packet` (an RX ring), `xdp (driver)`,
    /// `xdp (generic)` or `tc` (the in-kernel counter at that hook),
    /// `packet (XDP refused: why)`; empty when nothing was counted.
    pub rx_io: String,
    /// False when nothing was counted (`--rx none`): the receive figures
    /// are then zero and mean nothing.
    pub counted: bool,
    pub duration_s: f64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Sent and never received (duplicates not counted as received).
    pub lost: u64,
    pub loss_pct: f64,
    pub duplicates: u64,
    pub reordered: u64,
    /// Frames without this run's signature seen on the receive interface.
    pub rx_foreign: u64,
    /// Frames the receive ring itself dropped (the generator's own loss,
    /// not the device's).
    pub rx_ring_drops: u64,
    pub tx_mpps: f64,
    pub rx_mpps: f64,
    pub tx_l1_gbps: f64,
    pub tx_l2_gbps: f64,
    pub rx_l1_gbps: f64,
    pub rx_l2_gbps: f64,
    pub latency: Option<Latency>,
    /// The generator's CPU (all its threads), % of one CPU.
    pub gen_cpu_pct: f64,
    /// The whole machine's CPU, % of all CPUs.
    pub system_cpu_pct: f64,
    pub flows: u32,
    /// Flows that lost frames.
    pub flows_with_loss: u32,
    /// Per flow (first 4096 flows): frames sent, frames received.
    pub per_flow: Vec<(u64, u64)>,
}

/// How the receiver counts: a TPACKET_V3 ring (each frame copied to
/// user space) or the XDP counter (nothing copied).
enum Rx {
    Ring(RxRing),
    Xdp(XdpCounter),
}

/// A live view for progress bars.
#[derive(Debug, Default)]
pub struct Live {
    pub tx: AtomicU64,
    pub rx: AtomicU64,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// At a fixed rate, frames leave in bursts of what is due every tick.
const PACING_TICK: Duration = Duration::from_micros(50);

struct Sent {
    packets: u64,
    secs: f64,
    io: String,
}

fn sender(
    pool: &Pool,
    t: usize,
    spec: &Spec,
    start: &Barrier,
    stop: &AtomicBool,
    live: &Live,
) -> Result<Sent, String> {
    // Every thread reaches the barrier, even one that failed, so that no
    // other thread waits for it forever.
    let opened = spec
        .tx
        .enter()
        .and_then(|_| Tx::open(spec, t, pool.max_len()));
    let mine: Vec<usize> = pool.of_thread(t).collect();
    let threads = pool.threads();
    let quota = match spec.limit {
        Limit::Count(n) => n / threads as u64 + u64::from((t as u64) < n % threads as u64),
        Limit::Time(_) => u64::MAX,
    };
    let deadline = match spec.limit {
        Limit::Time(d) => Some(d),
        Limit::Count(_) => None,
    };
    let per_thread_pps = spec.rate_pps.map(|r| r / threads as f64);
    if per_thread_pps.is_some() {
        // Sleeps between frames at a fixed rate are short: wake on time,
        // not up to 50 µs late (the default timer slack).
        // SAFETY: PR_SET_TIMERSLACK takes a plain integer.
        unsafe {
            nix::libc::prctl(nix::libc::PR_SET_TIMERSLACK, 1 as nix::libc::c_ulong);
        }
    }
    start.wait();
    let (mut ring, io) = opened?;
    // Which template each ring slot holds.
    let mut held = vec![u32::MAX; ring.slots()];
    let t0 = Instant::now();
    let mut sent: u64 = 0;
    let mut k = 0usize;
    while sent < quota && !stop.load(Ordering::Relaxed) {
        let elapsed = t0.elapsed();
        if deadline.is_some_and(|d| elapsed >= d) {
            break;
        }
        // As fast as possible: fill the whole ring, then one system call
        // (as trafgen does); at a fixed rate, what is due.
        let want = match per_thread_pps.map(|pps| pace(pps, elapsed, sent, quota)) {
            None => (TX_SLOTS as u64).min(quota - sent),
            Some(Pace::Send(n)) => n.min(quota - sent),
            Some(Pace::Wait(d)) => {
                std::thread::sleep(d);
                continue;
            }
            Some(Pace::Spin) => {
                std::hint::spin_loop();
                continue;
            }
        };
        let mut ts = 0;
        let mut n = 0;
        while n < want {
            if n % BATCH as u64 == 0 {
                ts = now_ns() as u32;
            }
            let (e, bytes) = pool.get(mine[k]);
            let s = Signature {
                stream: t as u8,
                flow: e.flow,
                seq: sent as u32,
                ts,
            };
            let tail = e.tail_sum;
            let template = mine[k] as u32;
            if !ring.push(|slot, area| {
                let f = &mut area[..bytes.len()];
                // A slot that last carried this template holds its bytes
                // already (the pool's cycle usually divides the ring):
                // only the signature changes.
                if held[slot] != template {
                    f.copy_from_slice(bytes);
                    held[slot] = template;
                }
                s.write(f, tail);
                bytes.len()
            }) {
                break;
            }
            n += 1;
            sent += 1;
            k += 1;
            if k == mine.len() {
                k = 0;
            }
        }
        ring.flush()
            .map_err(|e| format!("sending on {}: {e}", spec.tx))?;
        live.tx.fetch_add(n, Ordering::Relaxed);
    }
    let secs = t0.elapsed().as_secs_f64();
    // Frames marked but not yet taken by the kernel (its queue was full at
    // the last flush) are sent before the count is final.
    if !ring
        .drain(Duration::from_secs(1))
        .map_err(|e| format!("sending on {}: {e}", spec.tx))?
    {
        return Err(format!(
            "sending on {}: the kernel did not take the last frames within 1 s",
            spec.tx
        ));
    }
    Ok(Sent {
        packets: sent,
        secs,
        io,
    })
}

/// What a thread sending `pps` frames a second does now.
enum Pace {
    /// Send this many (at most a ring's worth).
    Send(u64),
    /// Sleep this long first.
    Wait(Duration),
    /// The next frames are due within microseconds: look again.
    Spin,
}

/// What is due at `elapsed` with `sent` of `quota` sent, sent when a
/// tick's worth is (one frame at rates below 1/TICK): between ticks the
/// thread sleeps, where spinning between frames would take the CPU that
/// the device under test shares with it here.
fn pace(pps: f64, elapsed: Duration, sent: u64, quota: u64) -> Pace {
    let burst = ((pps * PACING_TICK.as_secs_f64()) as u64).max(1);
    let due = (elapsed.as_secs_f64() * pps) as u64 + 1;
    let mut want = (TX_SLOTS as u64).min(due.saturating_sub(sent));
    if want < burst.min(quota - sent) {
        want = 0;
    }
    if want > 0 {
        return Pace::Send(want);
    }
    let next = sent + burst.min(quota - sent);
    let wait = (next as f64 / pps - elapsed.as_secs_f64()).max(0.0);
    if wait > 20e-6 {
        Pace::Wait(Duration::from_secs_f64(wait - 10e-6))
    } else {
        Pace::Spin
    }
}

/// The receiving side: an RX ring (`--io packet`), or the XDP counter
/// (`--io xdp`; `--io auto` falls back to the ring, saying why). Returns
/// the frames the ring dropped and how it counted.
fn receiver(
    at: &Endpoint,
    spec: &Spec,
    streams: usize,
    counter: &mut Counter,
    ready: &Barrier,
    done: &AtomicBool,
    live: &Live,
) -> Result<(u64, String), String> {
    let flows = counter.per_flow.len() as u32;
    let xdp = || -> Result<(XdpCounter, String), String> {
        let mut c = XdpCounter::load(flows, streams as u32, false)
            .map_err(|e| format!("the XDP counter: {e}"))?;
        let hook = spec
            .count_hook
            .unwrap_or_else(|| Hook::for_device(&at.ifname));
        let mode = c
            .attach(&at.ifname, hook)
            .map_err(|e| format!("the XDP counter on {at}: {e}"))?;
        Ok((
            c,
            if hook == Hook::Tc {
                mode.to_string()
            } else {
                format!("xdp ({mode})")
            },
        ))
    };
    let ring =
        || RxRing::open(&at.ifname, 1 << 20, 64, 10).map_err(|e| format!("RX ring on {at}: {e}"));
    let opened = at.enter().and_then(|_| match spec.io {
        Io::Packet => ring().map(|r| (Rx::Ring(r), "packet".to_string())),
        Io::Xdp => xdp().map(|(c, m)| (Rx::Xdp(c), m)),
        Io::Auto => match xdp() {
            Ok((c, m)) => Ok((Rx::Xdp(c), m)),
            Err(e) => ring().map(|r| (Rx::Ring(r), format!("packet (XDP refused: {e})"))),
        },
    });
    ready.wait();
    let (rx, name) = opened?;
    let mut ring = match rx {
        Rx::Xdp(c) => return count_xdp(&c, at, counter, done, live).map(|()| (0, name)),
        Rx::Ring(r) => r,
    };
    // Counters of the socket so far (frames before the run) are not ours.
    let _ = ring.stats();
    let mut quiet_since: Option<Instant> = None;
    loop {
        let n = ring
            .poll(20, |f| counter.frame(f.data, f.wire_len, f.ts_ns))
            .map_err(|e| format!("receiving on {at}: {e}"))?;
        live.rx.store(counter.rx, Ordering::Relaxed);
        if done.load(Ordering::Relaxed) {
            if n > 0 {
                quiet_since = None;
            }
            let q = *quiet_since.get_or_insert_with(Instant::now);
            if q.elapsed() >= DRAIN {
                break;
            }
        }
    }
    Ok((ring.stats().map_or(0, |s| s.drops), name))
}

/// Wait for the run to end and the counter to go quiet, then take its
/// counts into `counter`.
fn count_xdp(
    c: &XdpCounter,
    at: &Endpoint,
    counter: &mut Counter,
    done: &AtomicBool,
    live: &Live,
) -> Result<(), String> {
    let err = |e: crate::xdp::Error| format!("reading the XDP counter on {at}: {e}");
    let mut quiet_since: Option<Instant> = None;
    let mut last = 0;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let rx = c.rx().map_err(err)?;
        live.rx.store(rx, Ordering::Relaxed);
        if done.load(Ordering::Relaxed) {
            if rx != last {
                quiet_since = None;
            }
            let q = *quiet_since.get_or_insert_with(Instant::now);
            if q.elapsed() >= DRAIN {
                break;
            }
        }
        last = rx;
    }
    let n = c.read().map_err(err)?;
    let t = n.totals;
    counter.rx = t.rx;
    counter.rx_bytes = t.rx_bytes;
    counter.dups = t.dups;
    counter.reordered = t.reordered;
    counter.foreign = t.foreign;
    for (mine, theirs) in counter.per_flow.iter_mut().zip(&n.per_flow) {
        *mine = *theirs;
    }
    counter.latency = crate::count::Histogram::from_parts(
        &n.latency,
        t.lat_n,
        t.lat_sum,
        t.lat_min as u32,
        t.lat_max as u32,
    );
    Ok(())
}

/// Send `pool` as `spec` says and count what arrives. `stop` ends the run
/// early (Ctrl-C); what was measured until then is returned.
pub fn run(pool: &Pool, spec: &Spec, stop: &AtomicBool, live: &Live) -> Result<Measured, String> {
    let threads = pool.threads();
    let start = Barrier::new(threads + 1 + usize::from(spec.rx.is_some()));
    let sending_done = AtomicBool::new(false);
    let counter = Mutex::new(Counter::new(pool.flows(), threads));
    let cpu0 = cpu::Snapshot::take(&[std::process::id()]);
    let (sent, rx_drops) = std::thread::scope(|s| {
        let rx = spec.rx.as_ref().map(|at| {
            s.spawn(|| {
                let mut c = counter.lock().map_err(|_| "counter poisoned".to_string())?;
                receiver(at, spec, threads, &mut c, &start, &sending_done, live)
            })
        });
        let txs: Vec<_> = (0..threads)
            .map(|t| {
                let start = &start;
                s.spawn(move || sender(pool, t, spec, start, stop, live))
            })
            .collect();
        start.wait();
        let sent: Vec<Result<Sent, String>> = txs
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a sender thread panicked".into()))
            })
            .collect();
        sending_done.store(true, Ordering::Relaxed);
        let rx = rx.map_or(Ok((0, String::new())), |h| {
            h.join()
                .unwrap_or_else(|_| Err("the receiver thread panicked".into()))
        });
        (sent, rx)
    });
    let usage = cpu0.usage();
    let (rx_ring_drops, rx_io) = rx_drops?;
    let sent: Vec<Sent> = sent.into_iter().collect::<Result<_, _>>()?;
    let c = counter
        .into_inner()
        .map_err(|_| "counter poisoned".to_string())?;
    let secs = sent.iter().map(|s| s.secs).fold(0.0, f64::max).max(1e-9);
    let tx_packets: u64 = sent.iter().map(|s| s.packets).sum();
    let tx_bytes: u64 = sent
        .iter()
        .enumerate()
        .map(|(t, s)| pool.tx_bytes(t, s.packets))
        .sum();
    let counted = spec.rx.is_some();
    let mut tx_flow = vec![0u64; pool.flows() as usize];
    for (t, s) in sent.iter().enumerate() {
        pool.tx_per_flow(t, s.packets, &mut tx_flow);
    }
    let flows_with_loss = tx_flow
        .iter()
        .zip(&c.per_flow)
        .filter(|(t, r)| counted && r < t)
        .count() as u32;
    let lost = if counted {
        tx_packets.saturating_sub(c.rx)
    } else {
        0
    };
    let gbps = |bytes: u64| bytes as f64 * 8.0 / secs / 1e9;
    Ok(Measured {
        io: {
            let mut ios: Vec<&str> = sent.iter().map(|s| s.io.as_str()).collect();
            ios.dedup();
            ios.join("; ")
        },
        rx_io,
        counted,
        duration_s: secs,
        tx_packets,
        tx_bytes,
        rx_packets: c.rx,
        rx_bytes: c.rx_bytes,
        lost,
        loss_pct: if tx_packets == 0 || !counted {
            0.0
        } else {
            100.0 * lost as f64 / tx_packets as f64
        },
        duplicates: c.dups,
        reordered: c.reordered,
        rx_foreign: c.foreign,
        rx_ring_drops,
        tx_mpps: tx_packets as f64 / secs / 1e6,
        rx_mpps: c.rx as f64 / secs / 1e6,
        tx_l1_gbps: gbps(tx_bytes + 20 * tx_packets),
        tx_l2_gbps: gbps(tx_bytes),
        rx_l1_gbps: gbps(c.rx_bytes + 20 * c.rx),
        rx_l2_gbps: gbps(c.rx_bytes),
        latency: c.latency.summary(),
        gen_cpu_pct: usage.datapath_pct,
        system_cpu_pct: usage.system_pct,
        flows: pool.flows(),
        flows_with_loss,
        per_flow: tx_flow
            .iter()
            .zip(&c.per_flow)
            .take(4096)
            .map(|(t, r)| (*t, *r))
            .collect(),
    })
}

/// Average frame size of the pool's sequence, FCS included.
pub fn avg_frame(pool: &Pool) -> f64 {
    let n = pool.len().max(1);
    (0..pool.len())
        .map(|i| pool.get(i).1.len() + crate::build::FCS)
        .sum::<usize>() as f64
        / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_the_units_people_write() {
        assert_eq!(Rate::parse("max"), Ok(Rate::Max));
        assert_eq!(Rate::parse("250kpps"), Ok(Rate::Pps(250e3)));
        assert_eq!(Rate::parse("1.5Mpps"), Ok(Rate::Pps(1.5e6)));
        assert_eq!(Rate::parse("100000"), Ok(Rate::Pps(1e5)));
        assert_eq!(Rate::parse("2Gbps"), Ok(Rate::Bps(2e9)));
        // 1 Gbit/s of 125-byte frames is 1 Mfps.
        assert_eq!(Rate::Bps(1e9).pps(125.0), Some(1e6));
        for bad in ["", "fast", "-3", "0", "5 parsecs", "nanpps"] {
            let e = Rate::parse(bad).unwrap_err();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_rate_or_endpoint_text_is_read_without_panic(s in "\\PC{0,24}") {
            let _ = Rate::parse(&s).map(|r| r.pps(100.0));
            let _ = Endpoint::parse(&s);
        }
    }

    #[test]
    fn endpoints_name_an_interface_and_maybe_a_namespace() {
        assert_eq!(
            Endpoint::parse("veth0@tg").unwrap(),
            Endpoint {
                ifname: "veth0".into(),
                netns: Some("tg".into())
            }
        );
        assert_eq!(Endpoint::parse("eth1").unwrap().netns, None);
        for bad in ["", "@ns", "a@", "sixteen-chars-xx"] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
