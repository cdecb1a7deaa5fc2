//! `tunlab gen` when it sends: one run (or one zero-loss search) per frame
//! size, a progress bar while it runs, then a table like the TRex article's
//! and, with --json, every figure and trial.

use super::args::{fail, Args};
use serde::Serialize;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tunlab_gen::ndr::{self, Found, Outcome, Phase, Step};
use tunlab_gen::pool::Pool;
use tunlab_gen::send::{self, Endpoint, Hook, Io, Limit, Live, Measured, Rate, Spec};
use tunlab_gen::topo::Wire;
use tunlab_gen::{Builder, Sizes};
use tunlab_lab::pvp;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// One row: a frame size's run, or its search's final trial.
#[derive(Debug, Serialize)]
struct Row {
    frame_size: String,
    /// The rate asked, frames/s (`None`: as fast as possible).
    rate_pps: Option<f64>,
    measured: Measured,
    #[serde(skip_serializing_if = "Option::is_none")]
    search: Option<Found>,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    description: &'a str,
    tx: String,
    rx: String,
    /// The PVP node's datapath (`userspace`, `ebpf`), with --pvp.
    #[serde(skip_serializing_if = "Option::is_none")]
    pvp_node: Option<&'a str>,
    /// The PVP tunnel (`geneve`, `vxlan`), with --pvp.
    #[serde(skip_serializing_if = "Option::is_none")]
    pvp_tunnel: Option<&'a str>,
    /// sockperf's ping-pong through the same node, per frame size, with
    /// --sockperf.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    sockperf: Vec<SockperfRow>,
    threads: usize,
    interrupted: bool,
    rows: Vec<Row>,
}

/// sockperf's round trips through the PVP node for one frame size.
#[derive(Debug, Serialize)]
struct SockperfRow {
    frame_size: String,
    /// sockperf's message size: the generator's UDP payload at this size.
    message_bytes: usize,
    mps: u32,
    trans_s: f64,
    rtt_p50_us: f64,
    rtt_p99_us: f64,
    rtt_mean_us: f64,
}

/// The outer and inner headers of the VXLAN PVP frame around the inner
/// UDP payload: Ethernet, IPv4, UDP, VXLAN, Ethernet, IPv4, UDP.
const VXLAN_PVP_HEADERS: usize = 14 + 20 + 8 + 8 + 14 + 20 + 8;
/// sockperf's smallest message.
const SOCKPERF_MIN: usize = 14;

fn secs(what: &str, v: f64) -> Result<Duration, String> {
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        return Err(format!(
            "{what}: {v} is not a number of seconds between 0 and 86400"
        ));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Run one trial with a progress bar that shows what was sent and
/// received so far.
fn trial(pool: &Pool, spec: &Spec, label: &str) -> Result<Measured, String> {
    let live = Live::default();
    let bar = match spec.limit {
        Limit::Time(d) => indicatif::ProgressBar::new(d.as_millis() as u64),
        Limit::Count(n) => indicatif::ProgressBar::new(n),
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(label.to_string());
    let started = std::time::Instant::now();
    let r = std::thread::scope(|s| {
        let h = s.spawn(|| send::run(pool, spec, &STOP, &live));
        while !h.is_finished() {
            std::thread::sleep(Duration::from_millis(200));
            let tx = live.tx.load(Ordering::Relaxed);
            let rx = live.rx.load(Ordering::Relaxed);
            let t = started.elapsed();
            bar.set_position(match spec.limit {
                Limit::Time(_) => t.as_millis() as u64,
                Limit::Count(_) => tx,
            });
            bar.set_message(format!(
                "tx {tx} rx {rx} ({:.3} Mpps)",
                tx as f64 / t.as_secs_f64().max(1e-3) / 1e6
            ));
        }
        h.join()
            .unwrap_or_else(|_| Err("the run's thread panicked".into()))
    });
    bar.finish_and_clear();
    r
}

fn fmt_rate(pps: Option<f64>) -> String {
    match pps {
        None => "max".into(),
        Some(p) if p >= 1e6 => format!("{:.3} Mpps", p / 1e6),
        Some(p) => format!("{:.1} kpps", p / 1e3),
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "{:>10} {:>8} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>9} {:>5} {:>5} {:>17} {:>7} {:>7}",
        "Frame (B)", "Dur (s)", "Rate", "Flows", "Tx L1", "Tx L2", "Rx L1", "Rx L2", "Tx Mpps",
        "Rx Mpps", "Drop (pk)", "Drop %", "Dup", "Reord", "Lat avg/p99 (µs)", "CPU gen", "CPU all"
    );
    println!(
        "{:>10} {:>8} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8}",
        "", "", "", "", "Gbit/s", "Gbit/s", "Gbit/s", "Gbit/s"
    );
    for r in rows {
        let m = &r.measured;
        let lat = m
            .latency
            .map_or("-".into(), |l| format!("{:.1}/{:.1}", l.mean_us, l.p99_us));
        if !m.counted {
            println!(
                "{:>10} {:>8.2} {:>10} {:>7} {:>8.3} {:>8.3} {:>8} {:>8} {:>8.3} {:>8} {:>10} {:>9} {:>5} {:>5} {:>17} {:>6.1}% {:>6.1}%",
                r.frame_size, m.duration_s, fmt_rate(r.rate_pps), m.flows, m.tx_l1_gbps,
                m.tx_l2_gbps, "-", "-", m.tx_mpps, "-", "-", "-", "-", "-", "-",
                m.gen_cpu_pct, m.system_cpu_pct,
            );
            continue;
        }
        println!(
            "{:>10} {:>8.2} {:>10} {:>7} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>10} {:>9.4} {:>5} {:>5} {:>17} {:>6.1}% {:>6.1}%",
            r.frame_size,
            m.duration_s,
            fmt_rate(r.rate_pps),
            m.flows,
            m.tx_l1_gbps,
            m.tx_l2_gbps,
            m.rx_l1_gbps,
            m.rx_l2_gbps,
            m.tx_mpps,
            m.rx_mpps,
            m.lost,
            m.loss_pct,
            m.duplicates,
            m.reordered,
            lat,
            m.gen_cpu_pct,
            m.system_cpu_pct,
        );
    }
    if let Some(r) = rows.first() {
        println!("  sent through: {}", r.measured.io);
        if r.measured.counted {
            println!("  counted through: {}", r.measured.rx_io);
        }
    }
    for r in rows {
        let m = &r.measured;
        if m.flows_with_loss > 0 || m.rx_ring_drops > 0 || m.rx_foreign > 0 {
            println!(
                "  {} B: {} of {} flows lost frames; receive ring dropped {}; {} frames without this run's signature",
                r.frame_size, m.flows_with_loss, m.flows, m.rx_ring_drops, m.rx_foreign
            );
        }
        if let Some(f) = &r.search {
            match (f.rate_pps, f.generator_limited) {
                (Some(p), true) => println!(
                    "  {} B: no loss at the generator's top rate {}: the device is faster than this generator here",
                    r.frame_size,
                    fmt_rate(Some(p))
                ),
                (Some(p), false) => println!(
                    "  {} B: highest rate within the loss allowed: {} ({:.3} Gbit/s L2), {} trials",
                    r.frame_size,
                    fmt_rate(Some(p)),
                    r.measured.tx_l2_gbps,
                    f.steps.len()
                ),
                (None, _) => println!("  {} B: no rate passed", r.frame_size),
            }
        }
    }
}

fn print_step(size: &str, st: &Step) {
    eprintln!(
        "  {size} B {:<10} {:>14}: tx {} rx {} ({:.3} Mpps sent) -> {} ({})",
        match st.phase {
            Phase::Max => "top rate",
            Phase::Search => "search",
            Phase::Validation => "validation",
        },
        fmt_rate(st.rate_pps),
        st.outcome.tx,
        st.outcome.rx,
        st.outcome.tx_pps / 1e6,
        if st.passed { "pass" } else { "FAIL" },
        st.why
    );
}

/// The run's settings, checked before anything is set up.
struct Plan {
    rate: Rate,
    limit: Limit,
    io: Io,
    /// Where the in-kernel counter runs (`None`: the device's cheaper).
    count_hook: Option<Hook>,
    /// The search's settings, with --ndr or --pdr.
    search: Option<ndr::Settings>,
    /// The PVP test's node, tunnel and reflector, with --pvp.
    pvp: Option<pvp::Setup>,
}

fn plan(a: &Args) -> Result<Plan, String> {
    if a.threads == 0 || a.threads > 64 {
        return Err(format!("--threads: {} is not between 1 and 64", a.threads));
    }
    let rate = Rate::parse(&a.rate)?;
    let io = Io::parse(&a.io).map_err(|e| format!("--io: {e}"))?;
    let mut setup = None;
    if a.pvp {
        let node = pvp::Node::parse(&a.node).map_err(|e| format!("--node: {e}"))?;
        let tunnel = pvp::Tunnel::parse(&a.tunnel).map_err(|e| format!("--tunnel: {e}"))?;
        let reflector =
            pvp::Reflector::parse(&a.reflector).map_err(|e| format!("--reflector: {e}"))?;
        setup = Some(pvp::Setup {
            node,
            tunnel,
            reflector,
        });
        if a.sockperf && tunnel != pvp::Tunnel::Vxlan {
            return Err(
                "--sockperf: sockperf crosses the node only in a tunnel this kernel \
                        has: add --tunnel vxlan (there is no kernel Geneve device here)"
                    .into(),
            );
        }
        if a.sockperf && !matches!(rate, Rate::Pps(_)) {
            return Err(format!(
                "--sockperf: --rate {} is not a fixed frame rate; sockperf's ping-pong \
                 needs one (e.g. --rate 10kpps)",
                a.rate
            ));
        }
    }
    let limit = match a.count {
        Some(0) => return Err("--count: 0 frames would send nothing".into()),
        Some(n) => Limit::Count(n),
        None => Limit::Time(secs("--duration", a.duration)?),
    };
    let loss_pct = match (a.ndr, a.pdr) {
        (true, _) => Some(0.0),
        (false, Some(p)) if p.is_finite() && (0.0..100.0).contains(&p) => Some(p),
        (false, Some(p)) => return Err(format!("--pdr: {p} is not a loss in % (0 to 100)")),
        (false, None) => None,
    };
    let search = match loss_pct {
        None => None,
        Some(loss_pct) => {
            if !(a.granularity.is_finite() && a.granularity > 0.0 && a.granularity < 100.0) {
                return Err(format!(
                    "--granularity: {} is not a % between 0 and 100",
                    a.granularity
                ));
            }
            Some(ndr::Settings {
                trial: secs("--trial", a.trial)?,
                validation: secs("--validation", a.validation)?,
                granularity_pct: a.granularity,
                loss_pct,
                ..ndr::Settings::default()
            })
        }
    };
    let count_hook = a.count_hook.as_deref().map(|h| match h {
        "tc" => Hook::Tc,
        _ => Hook::Xdp,
    });
    Ok(Plan {
        rate,
        limit,
        io,
        count_hook,
        search,
        pvp: setup,
    })
}

fn one_size(plan: &Plan, pool: &Pool, tx: &Endpoint, rx: &Option<Endpoint>) -> Result<Row, String> {
    let size = pool.size_name();
    let rate = plan.rate.pps(send::avg_frame(pool));
    let Some(settings) = &plan.search else {
        let spec = Spec {
            tx: tx.clone(),
            rx: rx.clone(),
            rate_pps: rate,
            limit: plan.limit,
            io: plan.io,
            count_hook: plan.count_hook,
        };
        let m = trial(pool, &spec, &format!("{size} B"))?;
        return Ok(Row {
            frame_size: size,
            rate_pps: rate,
            measured: m,
            search: None,
        });
    };
    // The measurement behind each step, in step order.
    let mut trials: Vec<(Option<f64>, Measured)> = Vec::new();
    let found = ndr::search(
        settings,
        |r, d, phase| {
            if STOP.load(Ordering::SeqCst) {
                return Err("interrupted".to_string());
            }
            let spec = Spec {
                tx: tx.clone(),
                rx: rx.clone(),
                rate_pps: r,
                limit: Limit::Time(d),
                io: plan.io,
                count_hook: plan.count_hook,
            };
            let label = format!(
                "{size} B {} {}",
                format!("{phase:?}").to_lowercase(),
                fmt_rate(r)
            );
            let m = trial(pool, &spec, &label)?;
            let o = Outcome {
                tx: m.tx_packets,
                rx: m.rx_packets,
                tx_pps: m.tx_packets as f64 / m.duration_s,
            };
            trials.push((r, m));
            Ok(o)
        },
        |st| print_step(&size, st),
    )?;
    // The row shows the last trial that passed (the validation, or the
    // top rate), or the last trial if none did.
    let i = found
        .steps
        .iter()
        .rposition(|st| st.passed)
        .unwrap_or(found.steps.len().saturating_sub(1));
    let (rate_pps, measured) = trials
        .into_iter()
        .nth(i)
        .ok_or_else(|| "the search ran no trial".to_string())?;
    Ok(Row {
        frame_size: size,
        rate_pps,
        measured,
        search: Some(found),
    })
}

/// Before a PVP run is measured, its whole path must carry frames: the
/// switch has just started and its tenant's TAP may not be up yet. Bursts
/// of 64 frames at a low rate until one comes back whole, for up to 10 s.
fn warm_up(pool: &Pool, tx: &Endpoint, rx: &Option<Endpoint>) -> Result<(), String> {
    let spec = Spec {
        tx: tx.clone(),
        rx: rx.clone(),
        rate_pps: Some(10_000.0),
        limit: Limit::Count(64),
        io: Io::Packet,
        count_hook: None,
    };
    let started = std::time::Instant::now();
    loop {
        let m = send::run(pool, &spec, &STOP, &Live::default())?;
        if m.lost == 0 {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(10) || STOP.load(Ordering::SeqCst) {
            return Err(format!(
                "the PVP path does not carry frames: {} of {} came back in the last warm-up burst",
                m.rx_packets, m.tx_packets
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The PVP node: in namespaces here, or on a real host.
enum PvpNode {
    Here(Box<pvp::Pvp>),
    There(Box<pvp::RemotePvp>),
}

impl PvpNode {
    fn stop_reflector(&mut self) -> Result<tunlab_gen::reflect::Reflected, String> {
        match self {
            PvpNode::Here(p) => p.stop_reflector(),
            PvpNode::There(p) => p.stop_reflector(),
        }
    }
}

pub fn run(
    a: &Args,
    text: &str,
    builders: &[Builder],
    remote: Option<super::RemoteNode>,
) -> ExitCode {
    // Everything that can be wrong with the arguments is found before a
    // namespace is made.
    let plan = match plan(a) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let mut pools = Vec::new();
    for b in builders {
        match Pool::new(b, a.threads, a.seed) {
            Ok(p) => pools.push(p),
            Err(e) => return fail(e),
        }
    }
    catch_interrupts();
    if (a.ndr || a.pdr.is_some()) && a.rx.as_deref() == Some("none") {
        return fail("--ndr and --pdr count what arrives: give --rx an interface, not none");
    }
    let wiring = match wiring(a, &plan, builders, remote) {
        Ok(w) => w,
        Err(e) => return fail(e),
    };
    // The wire (or PVP node) stays up until the run ends.
    let Wiring {
        tx,
        rx,
        pvp: mut pvp_run,
        _wire: _wire_up,
    } = wiring;
    if a.pvp {
        if let Err(e) = warm_up(&pools[0], &tx, &rx) {
            return fail(e);
        }
    }
    let rx_name = rx
        .as_ref()
        .map_or("none (sending only)".into(), |r| r.to_string());
    let node = if a.pvp {
        format!(", PVP node on the {} datapath", a.node)
    } else {
        String::new()
    };
    eprintln!(
        "tunlab gen: {tx} -> {rx_name}, {} thread(s), rate {}{node}",
        a.threads, a.rate
    );
    let mut rows = Vec::new();
    let mut error = None;
    for pool in &pools {
        if STOP.load(Ordering::SeqCst) {
            break;
        }
        match one_size(&plan, pool, &tx, &rx) {
            Ok(r) => rows.push(r),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let mut sockperf = Vec::new();
    if let (true, Some(PvpNode::Here(p)), None) = (a.sockperf, pvp_run.as_mut(), &error) {
        match sockperf_rows(p, &rows, plan.rate, a.duration) {
            Ok(r) => sockperf = r,
            Err(e) => error = Some(e),
        }
    }
    let interrupted = STOP.load(Ordering::SeqCst);
    if !rows.is_empty() {
        print_table(&rows);
    }
    print_sockperf(&rows, &sockperf);
    if let Some(p) = pvp_run.as_mut() {
        // Frames the tenant lost are the node's to explain no more.
        match p.stop_reflector() {
            Ok(r) => println!(
                "  PVP tenant over the whole run: reflected {} frames, lost {} in its own rings",
                r.frames, r.dropped
            ),
            Err(e) => eprintln!("tunlab gen: the PVP reflector: {e}"),
        }
    }
    if let Some(path) = &a.json {
        let report = Report {
            description: text,
            tx: tx.to_string(),
            rx: rx_name,
            pvp_node: a.pvp.then_some(a.node.as_str()),
            pvp_tunnel: a.pvp.then_some(a.tunnel.as_str()),
            sockperf,
            threads: a.threads,
            interrupted,
            rows,
        };
        if let Err(e) = write_report(path, &report) {
            eprintln!("tunlab gen: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if let Some(e) = error {
        eprintln!("tunlab gen: {e}");
        return ExitCode::FAILURE;
    }
    if interrupted {
        eprintln!("tunlab gen: interrupted");
        return ExitCode::from(130);
    }
    ExitCode::SUCCESS
}

/// Ctrl-C and SIGTERM end the run between sizes, with what was
/// measured so far printed.
fn catch_interrupts() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: the handler only stores to an atomic, which is
    // async-signal-safe.
    unsafe {
        let _ = signal(Signal::SIGINT, SigHandler::Handler(on_interrupt));
        let _ = signal(Signal::SIGTERM, SigHandler::Handler(on_interrupt));
    }
}

fn write_report(path: &std::path::Path, report: &Report<'_>) -> Result<(), String> {
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, json + "\n").map_err(|e| e.to_string())
}

/// Where a run sends and counts, and what stands behind them: the PVP
/// node (here or over SSH), or the generator's own veth wire (both go
/// when this is dropped).
struct Wiring {
    tx: Endpoint,
    rx: Option<Endpoint>,
    pvp: Option<PvpNode>,
    _wire: Option<Wire>,
}

/// The run's endpoints: the PVP test's, the interfaces given, or a veth
/// wire of the generator's own.
fn wiring(
    a: &Args,
    plan: &Plan,
    builders: &[Builder],
    remote: Option<super::RemoteNode>,
) -> Result<Wiring, String> {
    let mut pvp_run = None;
    let mut wire = None;
    let (tx, rx) = match (&a.tx, &a.rx, plan.pvp) {
        (_, _, Some(setup)) if remote.is_some() => {
            let Some(node) = remote else {
                return Err("no PVP node".into());
            };
            let started = std::env::current_exe()
                .map_err(|e| format!("cannot find the tunlab binary: {e}"))
                .and_then(|exe| {
                    pvp::RemotePvp::start(node.ssh, &node.gen_ip, &node.node_ip, &exe, setup)
                        .map_err(|e| e.to_string())
                });
            let p = started.map_err(|e| format!("cannot set up the PVP node: {e}"))?;
            pvp_run = Some(PvpNode::There(Box::new(p)));
            let here = Endpoint {
                ifname: node.dev,
                netns: None,
            };
            (here.clone(), Some(here))
        }
        (_, _, Some(setup)) => {
            let started = std::env::current_exe()
                .map_err(|e| format!("cannot find the tunlab binary: {e}"))
                .and_then(|exe| {
                    let dir =
                        std::env::temp_dir().join(format!("tunlab-pvp-{}", std::process::id()));
                    let started = pvp::Pvp::start(&exe, &dir, setup).map_err(|e| e.to_string());
                    // The switch has read its configuration by now.
                    let _ = std::fs::remove_dir_all(&dir);
                    started
                });
            let p = match started {
                Ok(p) => p,
                Err(e) => return Err(format!("cannot set up the PVP test: {e}")),
            };
            let g = p.generator();
            pvp_run = Some(PvpNode::Here(Box::new(p)));
            (g.clone(), Some(g))
        }
        (Some(t), Some(r), None) => {
            let rx = match r.as_str() {
                "none" => Ok(None),
                r => Endpoint::parse(r).map(Some),
            };
            match (Endpoint::parse(t), rx) {
                (Ok(t), Ok(r)) => (t, r),
                (Err(e), _) => return Err(format!("--tx: {e}")),
                (_, Err(e)) => return Err(format!("--rx: {e}")),
            }
        }
        _ => {
            let max = builders
                .iter()
                .map(|b| match b.sizes() {
                    Sizes::Fixed(n) => *n,
                    Sizes::Imix => 1518,
                    Sizes::Natural => b.min_frame(),
                })
                .max()
                .unwrap_or(1518);
            let w = Wire::create(max)
                .map_err(|e| format!("cannot make the generator's veth wire: {e}"))?;
            let ends = (w.tx(), Some(w.rx()));
            wire = Some(w);
            ends
        }
    };
    Ok(Wiring {
        tx,
        rx,
        pvp: pvp_run,
        _wire: wire,
    })
}

/// sockperf's ping-pong through the PVP node for each row's frame size,
/// at the generator's rate and duration (the reflector stops first: it
/// would answer sockperf's messages too).
fn sockperf_rows(
    p: &mut pvp::Pvp,
    rows: &[Row],
    rate: Rate,
    duration: f64,
) -> Result<Vec<SockperfRow>, String> {
    let Rate::Pps(mps) = rate else {
        return Err("--sockperf needs a fixed frame rate".into());
    };
    let mps = mps.round() as u32;
    let secs = (duration.round() as u32).max(1);
    let mut out = Vec::new();
    for r in rows {
        if STOP.load(Ordering::SeqCst) {
            break;
        }
        let frame: usize = r.frame_size.parse().map_err(|_| {
            format!(
                "--sockperf: frame size '{}' is not one size (IMIX has no one message size)",
                r.frame_size
            )
        })?;
        let message = frame.saturating_sub(VXLAN_PVP_HEADERS).max(SOCKPERF_MIN);
        eprintln!(
            "tunlab gen: sockperf ping-pong, {message}-byte messages at {mps}/s for {secs} s"
        );
        let s = p
            .sockperf(message, mps, secs)
            .map_err(|e| format!("sockperf through the PVP node: {e}"))?;
        out.push(SockperfRow {
            frame_size: r.frame_size.clone(),
            message_bytes: message,
            mps,
            trans_s: s.trans_s,
            rtt_p50_us: s.rtt_p50_us,
            rtt_p99_us: s.rtt_p99_us,
            rtt_mean_us: s.rtt_mean_us,
        });
    }
    Ok(out)
}

/// The generator's latencies beside sockperf's round trips.
fn print_sockperf(rows: &[Row], sockperf: &[SockperfRow]) {
    if sockperf.is_empty() {
        return;
    }
    println!("\nRound trip through the node (µs): tunlab gen beside sockperf ping-pong");
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "Frame (B)",
        "gen p50",
        "gen p99",
        "gen mean",
        "sp p50",
        "sp p99",
        "sp mean",
        "p50 gen/sp",
        "p99 gen/sp"
    );
    for s in sockperf {
        let Some(l) = rows
            .iter()
            .find(|r| r.frame_size == s.frame_size)
            .and_then(|r| r.measured.latency.as_ref())
        else {
            continue;
        };
        println!(
            "{:>10} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9.2}x {:>9.2}x",
            s.frame_size,
            l.p50_us,
            l.p99_us,
            l.mean_us,
            s.rtt_p50_us,
            s.rtt_p99_us,
            s.rtt_mean_us,
            l.p50_us / s.rtt_p50_us,
            l.p99_us / s.rtt_p99_us,
        );
    }
}
