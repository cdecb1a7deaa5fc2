//! The first packet of a new flow (`first_packet-SIZEB-1i`): how long the
//! datapaths take to carry a flow's first packet from tenant to tenant,
//! a miss, an upcall and an install on each node included, against the
//! packet that follows it on the same flow.
//!
//! Each probe: the variant empties its flow caches (tunlab's eBPF nodes
//! `del-flows --datapath`, Open vSwitch `dpctl/del-flows`; the kernel's
//! VXLAN and tunlab's userspace path keep no per-flow cache, so their
//! first packet is an ordinary one), the client opens a new UDP socket (a
//! new source port: a new flow) and sends one datagram stamped with
//! `CLOCK_MONOTONIC`; the server stamps its arrival with the same clock
//! (namespaces share it) and echoes both stamps; then a second datagram on
//! the same flow. One-way delay = arrival − departure, so the return trip
//! (which misses too) is not counted.

use crate::meter::Meter;
use crate::sample::{FirstPacket, Sample, Test};
use crate::traffic::Peers;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tunlab_netio::netns;

/// Bytes of a probe that carry its stamps: sequence, sent, arrived.
const STAMPS: usize = 24;
/// At most this many probes a sample (a bound; the seconds end it first).
const MAX_PROBES: usize = 100_000;

/// The clock every namespace shares, in nanoseconds.
fn now_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64);
    t.unwrap_or(0)
}

/// Pin the calling thread to `cpu` (the lab's `--tenant-cpus`).
fn pin(cpu: Option<u16>) -> Result<(), String> {
    let Some(c) = cpu else { return Ok(()) };
    let mut set = nix::sched::CpuSet::new();
    set.set(c as usize).map_err(|e| format!("CPU {c}: {e}"))?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| format!("pin to CPU {c}: {e}"))
}

/// The one-way delays of a sample's probes, in µs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Delays {
    pub first: Vec<f64>,
    pub next: Vec<f64>,
    /// Probes whose first or second datagram did not come back within 1 s.
    pub lost: usize,
}

/// The `q` quantile (0..=1) of `v` by the nearest rank; NaN when empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

/// The echo server: in the server tenant, stamps each datagram's arrival
/// and sends it back, until `stop`.
fn serve(sock: &UdpSocket, stop: &AtomicBool) {
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let at = now_ns();
        if n >= STAMPS {
            buf[16..24].copy_from_slice(&at.to_le_bytes());
            let _ = sock.send_to(&buf[..n], from);
        }
    }
}

/// One datagram out and its echo back: the one-way delay in µs, or None
/// when the echo did not come within the socket's timeout.
fn probe(sock: &UdpSocket, seq: u64, size: usize, buf: &mut [u8]) -> Option<f64> {
    let buf = &mut buf[..size];
    buf.fill(0);
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..16].copy_from_slice(&now_ns().to_le_bytes());
    sock.send(buf).ok()?;
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        let n = sock.recv(buf).ok()?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&buf[i..i + 8]);
            u64::from_le_bytes(w)
        };
        // An echo of an earlier, timed-out probe is skipped.
        if n >= STAMPS && word(0) == seq {
            let (t0, t1) = (word(8), word(16));
            return Some(t1.saturating_sub(t0) as f64 / 1e3);
        }
    }
    None
}

/// Probe for `secs` seconds from the client tenant to the server tenant,
/// emptying the caches with `flush` before each probe.
pub fn measure(
    p: Peers<'_>,
    size: usize,
    secs: u32,
    flush: &(dyn Fn() -> Result<(), String> + Sync),
) -> Result<Delays, String> {
    let size = size.max(STAMPS);
    let server_ip: std::net::IpAddr = p
        .server_ip
        .parse()
        .map_err(|e| format!("server address {}: {e}", p.server_ip))?;
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let stop = &stop;
        let server = s.spawn(move || {
            let bound = (|| {
                netns::enter(p.server.name()).map_err(|e| e.to_string())?;
                pin(p.cpus.map(|c| c[1]))?;
                let sock = UdpSocket::bind(SocketAddr::new(server_ip, 0))
                    .map_err(|e| format!("bind in {}: {e}", p.server.role))?;
                sock.set_read_timeout(Some(Duration::from_millis(100)))
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(sock)
            })();
            match bound {
                Ok(sock) => {
                    let _ = tx.send(sock.local_addr().map_err(|e| e.to_string()));
                    serve(&sock, stop);
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        });
        let client = s.spawn(move || {
            let to = rx
                .recv()
                .map_err(|_| "the echo server thread ended".to_string())??;
            netns::enter(p.client.name()).map_err(|e| e.to_string())?;
            pin(p.cpus.map(|c| c[0]))?;
            let mut d = Delays::default();
            let mut buf = vec![0u8; size];
            let end = Instant::now() + Duration::from_secs(secs as u64);
            let mut seq = 0u64;
            while Instant::now() < end && d.first.len() + d.lost < MAX_PROBES {
                flush()?;
                let sock = UdpSocket::bind("0.0.0.0:0")
                    .and_then(|s| s.connect(to).map(|_| s))
                    .and_then(|s| s.set_read_timeout(Some(Duration::from_secs(1))).map(|_| s))
                    .map_err(|e| format!("client socket in {}: {e}", p.client.role))?;
                seq += 1;
                let first = probe(&sock, seq, size, &mut buf);
                seq += 1;
                let next = probe(&sock, seq, size, &mut buf);
                match (first, next) {
                    (Some(a), Some(b)) => {
                        d.first.push(a);
                        d.next.push(b);
                    }
                    _ => d.lost += 1,
                }
            }
            Ok::<_, String>(d)
        });
        let r = client
            .join()
            .unwrap_or_else(|_| Err("the probe thread panicked".into()));
        stop.store(true, Ordering::Relaxed);
        let _ = server.join();
        r
    })
}

/// One sample of a `first_packet` test: the delays' p50 and p99, the
/// machine's CPU over it.
pub fn run_sample(
    p: Peers<'_>,
    test: &Test,
    secs: u32,
    meter: &Meter<'_>,
    flush: &(dyn Fn() -> Result<(), String> + Sync),
) -> Result<Sample, String> {
    if p.client.ssh().is_some() {
        return Err("the first-packet test over SSH is not built yet".into());
    }
    let cpu = meter.mark()?;
    let started = Instant::now();
    let d = measure(p, test.size, secs, flush)?;
    let (usage, hosts_cpu) = meter.usage(&cpu)?;
    let probes = d.first.len() + d.lost;
    if d.first.is_empty() {
        return Err(format!("no probe of {probes} came back"));
    }
    Ok(Sample {
        gbit_s: None,
        trans_s: None,
        rtt_mean_us: None,
        rtt_p50_us: None,
        rtt_p99_us: None,
        udp_loss_pct: Some(100.0 * d.lost as f64 / probes as f64),
        rx_pps: None,
        tcp_retransmits: None,
        cpu: usage,
        service_demand_us_per_kb: None,
        seconds: started.elapsed().as_secs_f64(),
        iface_rx_gbit_s: None,
        first_packet: Some(FirstPacket {
            probes: d.first.len(),
            first_p50_us: quantile(&d.first, 0.5),
            first_p99_us: quantile(&d.first, 0.99),
            next_p50_us: quantile(&d.next, 0.5),
            next_p99_us: quantile(&d.next, 0.99),
        }),
        hosts_cpu,
        round: None,
        seq: None,
        noise: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
        // Order does not matter.
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), 2.0);
    }

    #[test]
    fn the_clock_moves_forward() {
        let a = now_ns();
        let b = now_ns();
        assert!(a > 0 && b >= a);
    }
}
