//! The tests of the articles and of pbench-uperf: iperf3 for streams
//! (`-J` JSON), `tunlab rr` ([`crate::rr`], netperf's TCP_RR and UDP_RR)
//! for request/response, sockperf for the PVP test's paced ping-pong. One
//! sample runs `instances` client/server pairs at once (separate
//! processes, as pbench's instances are) and sums their figures.

use crate::cpu::Usage;
use crate::host::Host;
use crate::meter::Meter;
use crate::sample::{Kind, Sample, Test};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGINT/SIGTERM: running tools are stopped and the bench ends.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Where the server tenant listens.
#[derive(Debug, Clone, Copy)]
pub struct Peers<'a> {
    pub client: &'a Host,
    pub server: &'a Host,
    pub server_ip: &'a str,
    /// The server tenant's interface (for its byte counters).
    pub server_if: &'a str,
    /// CPUs the client and server tools are pinned to (`taskset`);
    /// `None`: the scheduler places them.
    pub cpus: Option<[u16; 2]>,
    /// The `tunlab` executable on the client's and on the server's host
    /// (`tunlab rr`).
    pub tunlab: [&'a str; 2],
}

/// `args` run under `taskset -c cpu` when a CPU is given.
fn pinned(cpu: Option<u16>, args: Vec<String>) -> Vec<String> {
    match cpu {
        Some(c) => ["taskset".to_string(), "-c".into(), c.to_string()]
            .into_iter()
            .chain(args)
            .collect(),
        None => args,
    }
}

fn rx_bytes(h: &Host, dev: &str) -> Option<u64> {
    h.run(&["cat", &format!("/sys/class/net/{dev}/statistics/rx_bytes")])
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Servers of each sample listen on fresh ports: a server killed with its
/// connection open leaves the port in TIME_WAIT, and not every tool
/// reuses such a port.
static NEXT_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
const PORTS_FROM: u16 = 20000;
const PORTS_SPAN: u16 = 20000;

fn take_ports(n: usize) -> u16 {
    let at = NEXT_PORT.fetch_add(n as u16, Ordering::SeqCst) % PORTS_SPAN;
    if at as usize + n > PORTS_SPAN as usize {
        NEXT_PORT.store(n as u16, Ordering::SeqCst);
        return PORTS_FROM;
    }
    PORTS_FROM + at
}

/// Run one sample of `test` for `secs` seconds; `pids` are the datapath
/// processes whose CPU is reported. The error carries the tool's output.
pub fn run_sample(
    p: Peers<'_>,
    test: &Test,
    secs: u32,
    meter: &Meter<'_>,
) -> Result<Sample, String> {
    let mut servers: Vec<Child> = Vec::new();
    let base = take_ports(test.instances);
    let result = (|| {
        for i in 0..test.instances {
            let port = (base + i as u16).to_string();
            let args = pinned(
                p.cpus.map(|c| c[1]),
                server_args(test, p.server_ip, &port, p.tunlab[1]),
            );
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            servers.push(p.server.spawn(&a).map_err(|e| e.to_string())?);
        }
        wait_listening(p.server, test, base)?;
        let rx0 = rx_bytes(p.server, p.server_if);
        let cpu = meter.mark()?;
        let started = Instant::now();
        let mut clients = Vec::new();
        for i in 0..test.instances {
            let port = (base + i as u16).to_string();
            let args = pinned(
                p.cpus.map(|c| c[0]),
                client_args(test, p.server_ip, &port, secs, p.tunlab[0]),
            );
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            clients.push(p.client.spawn(&a).map_err(|e| e.to_string())?);
        }
        let deadline = Duration::from_secs(secs as u64 + 20);
        let mut outs = Vec::new();
        for c in clients {
            outs.push(wait_output(c, started, deadline)?);
        }
        let (usage, hosts_cpu) = meter.usage(&cpu)?;
        let seconds = started.elapsed().as_secs_f64();
        let rx1 = rx_bytes(p.server, p.server_if);
        let mut s = combine(test, &outs, usage, seconds)?;
        s.hosts_cpu = hosts_cpu;
        // The tools run a little shorter than the whole sample (start-up),
        // so this slightly underestimates; tests allow for it.
        if let (Some(a), Some(b)) = (rx0, rx1) {
            s.iface_rx_gbit_s = Some(b.saturating_sub(a) as f64 * 8.0 / seconds / 1e9);
        }
        Ok(s)
    })();
    for mut s in servers {
        let _ = s.kill();
        let _ = s.wait();
    }
    result
}

/// `tunlab rr`'s protocol for an RR test.
fn rr_proto(t: &Test) -> &'static str {
    if t.kind == Kind::UdpRr {
        "udp"
    } else {
        "tcp"
    }
}

/// The server of one instance of `t`; `tunlab` is the executable on the
/// server's host.
pub(crate) fn server_args(t: &Test, ip: &str, port: &str, tunlab: &str) -> Vec<String> {
    let a = if t.kind.is_rr() {
        vec![
            tunlab,
            "rr",
            "serve",
            "--proto",
            rr_proto(t),
            "--bind",
            ip,
            "--port",
            port,
        ]
    } else {
        vec!["iperf3", "-s", "-1", "-B", ip, "-p", port]
    };
    a.into_iter().map(String::from).collect()
}

/// The client of one instance of `t` for `secs` seconds; `tunlab` is
/// the executable on the client's host.
pub(crate) fn client_args(t: &Test, ip: &str, port: &str, secs: u32, tunlab: &str) -> Vec<String> {
    if t.kind.is_rr() {
        let (secs, size) = (secs.to_string(), t.size.to_string());
        return [
            tunlab,
            "rr",
            "client",
            "--proto",
            rr_proto(t),
            ip,
            "--port",
            port,
            "--time",
            &secs,
            "--size",
            &size,
        ]
        .map(String::from)
        .to_vec();
    }
    let mut a: Vec<String> = [
        "iperf3",
        "-c",
        ip,
        "-p",
        port,
        "-t",
        &secs.to_string(),
        "-l",
        &t.size.to_string(),
        "-J",
    ]
    .map(String::from)
    .to_vec();
    match t.kind {
        Kind::TcpMaerts => a.push("-R".into()),
        Kind::TcpBidirec => a.push("--bidir".into()),
        Kind::UdpStream => a.extend(["-u".into(), "-b".into(), "0".into()]),
        _ => {}
    }
    if let Some(r) = t.rate_gbit {
        // The target is for all instances together.
        let each = r * 1e9 / t.instances as f64;
        a.extend(["-b".into(), format!("{}", each.round() as u64)]);
    }
    a
}

/// Wait until every server's port is open on the server host.
fn wait_listening(h: &Host, t: &Test, base: u16) -> Result<(), String> {
    let end = Instant::now() + Duration::from_secs(5);
    let flag = if t.kind == Kind::UdpRr {
        "-lun"
    } else {
        "-ltn"
    };
    loop {
        let out = h.run(&["ss", "-H", flag]).unwrap_or_default();
        let open = (0..t.instances)
            .filter(|i| out.contains(&format!(":{} ", base + *i as u16)))
            .count();
        if open == t.instances {
            return Ok(());
        }
        if Instant::now() > end {
            return Err(format!(
                "{}: only {open} of {} servers listening after 5 s",
                h.role, t.instances
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_output(mut c: Child, started: Instant, deadline: Duration) -> Result<String, String> {
    loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            let _ = c.kill();
            let _ = c.wait();
            return Err("interrupted".into());
        }
        match c.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > deadline => {
                let _ = c.kill();
                let out = c.wait_with_output().map_err(|e| e.to_string())?;
                return Err(format!(
                    "timed out after {deadline:?}; output: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(e.to_string()),
        }
    }
    let out = c.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "exited with {}: {}{}",
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(text)
}

/// Sum the instances' figures into one sample.
fn combine(t: &Test, outs: &[String], cpu: Usage, seconds: f64) -> Result<Sample, String> {
    let mut s = Sample {
        gbit_s: None,
        trans_s: None,
        rtt_mean_us: None,
        rtt_p50_us: None,
        rtt_p99_us: None,
        udp_loss_pct: None,
        rx_pps: None,
        tcp_retransmits: None,
        cpu,
        service_demand_us_per_kb: None,
        seconds,
        iface_rx_gbit_s: None,
        first_packet: None,
        hosts_cpu: Vec::new(),
        round: None,
        seq: None,
        noise: None,
    };
    let bytes;
    if t.kind.is_rr() {
        let (mut tps, mut lat, mut p50, mut p99) = (0.0, 0.0, 0.0, 0.0);
        let (mut done, mut lost) = (0u64, 0u64);
        for o in outs {
            let r = crate::rr::parse(o)?;
            tps += r.trans_s;
            lat += r.rtt_mean_us;
            p50 += r.rtt_p50_us;
            p99 = f64::max(p99, r.rtt_p99_us);
            (done, lost) = (done + r.transactions, lost + r.lost);
        }
        let n = outs.len().max(1) as f64;
        if t.kind == Kind::UdpRr {
            // Each lost request held its instance 200 ms: say so beside
            // the trans/s it lowered.
            s.udp_loss_pct = Some(100.0 * lost as f64 / (done + lost).max(1) as f64);
        }
        s.trans_s = Some(tps);
        s.rtt_mean_us = Some(lat / n);
        s.rtt_p50_us = Some(p50 / n);
        s.rtt_p99_us = Some(p99);
        bytes = tps * seconds * 2.0 * t.size as f64;
    } else {
        let (mut bps, mut retr, mut pkts, mut lost, mut secs) = (0.0, 0u64, 0u64, 0u64, 0.0f64);
        for o in outs {
            let r = parse_iperf3(o, t.kind)?;
            bps += r.bits_per_second;
            retr += r.retransmits;
            pkts += r.packets;
            lost += r.lost;
            secs = secs.max(r.seconds);
        }
        s.gbit_s = Some(bps / 1e9);
        bytes = bps / 8.0 * secs;
        if t.kind == Kind::UdpStream {
            s.udp_loss_pct = Some(if pkts > 0 {
                100.0 * lost as f64 / pkts as f64
            } else {
                0.0
            });
            s.rx_pps = Some((pkts - lost.min(pkts)) as f64 / secs.max(1e-6));
        } else {
            s.tcp_retransmits = Some(retr);
        }
    }
    if bytes > 0.0 {
        s.service_demand_us_per_kb = Some(cpu.system_busy_s * 1e6 / (bytes / 1024.0));
    }
    Ok(s)
}

/// What one iperf3 run reported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Iperf3 {
    /// Received payload bits per second (both directions for --bidir).
    pub bits_per_second: f64,
    pub retransmits: u64,
    pub packets: u64,
    pub lost: u64,
    pub seconds: f64,
}

/// Read iperf3's `-J` output.
pub fn parse_iperf3(json: &str, kind: Kind) -> Result<Iperf3, String> {
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| format!("iperf3 printed no JSON ({e}): {json:.200}"))?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        return Err(format!("iperf3: {e}"));
    }
    let end = v.get("end").ok_or("iperf3 JSON has no \"end\" section")?;
    let num = |sec: &str, f: &str| end.get(sec).and_then(|s| s.get(f)).and_then(|x| x.as_f64());
    if kind == Kind::UdpStream {
        let packets = num("sum", "packets").ok_or("iperf3 UDP JSON lacks end.sum.packets")? as u64;
        let lost = num("sum", "lost_packets").unwrap_or(0.0) as u64;
        let seconds = num("sum", "seconds").unwrap_or(0.0);
        let bps = num("sum", "bits_per_second").unwrap_or(0.0);
        // iperf3's UDP rate is the sender's; what arrived is what counts.
        let rx = if packets > 0 {
            bps * (packets - lost.min(packets)) as f64 / packets as f64
        } else {
            0.0
        };
        return Ok(Iperf3 {
            bits_per_second: rx,
            retransmits: 0,
            packets,
            lost,
            seconds,
        });
    }
    let mut bps =
        num("sum_received", "bits_per_second").ok_or("iperf3 JSON lacks end.sum_received")?;
    let seconds = num("sum_received", "seconds").unwrap_or(0.0);
    let mut retransmits = num("sum_sent", "retransmits").unwrap_or(0.0) as u64;
    if kind == Kind::TcpBidirec {
        bps += num("sum_received_bidir_reverse", "bits_per_second").unwrap_or(0.0);
        retransmits += num("sum_sent_bidir_reverse", "retransmits").unwrap_or(0.0) as u64;
    }
    Ok(Iperf3 {
        bits_per_second: bps,
        retransmits,
        packets: 0,
        lost: 0,
        seconds,
    })
}

/// One sockperf UDP ping-pong of `size`-byte messages at `mps` messages
/// a second for `secs` seconds, from `client` to a server on `server` at
/// `ip` (the PVP test's latency reference, through the same node).
pub fn ping_pong(
    client: &Host,
    server: &Host,
    ip: &str,
    size: usize,
    mps: u32,
    secs: u32,
) -> Result<Sockperf, String> {
    let test = Test {
        kind: Kind::UdpRr,
        size,
        instances: 1,
        rate_gbit: None,
    };
    let port = take_ports(1);
    let p = port.to_string();
    let mut srv = server
        .spawn(&["sockperf", "server", "-i", ip, "-p", &p])
        .map_err(|e| e.to_string())?;
    let result = (|| {
        wait_listening(server, &test, port)?;
        let (t, m, r) = (secs.to_string(), size.to_string(), mps.to_string());
        let ca = [
            "sockperf",
            "ping-pong",
            "-i",
            ip,
            "-p",
            &p,
            "-t",
            &t,
            "-m",
            &m,
            "--mps",
            &r,
        ];
        let c = client.spawn(&ca).map_err(|e| e.to_string())?;
        let out = wait_output(c, Instant::now(), Duration::from_secs(secs as u64 + 20))?;
        parse_sockperf(&out)
    })();
    let _ = srv.kill();
    let _ = srv.wait();
    result
}

/// What one sockperf ping-pong run reported (latencies as round trips).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sockperf {
    pub trans_s: f64,
    pub rtt_mean_us: f64,
    pub rtt_p50_us: f64,
    pub rtt_p99_us: f64,
}

/// Read sockperf's ping-pong summary: the valid-duration run time and
/// received messages give transactions/s; its latencies are half round
/// trips and are doubled.
pub fn parse_sockperf(out: &str) -> Result<Sockperf, String> {
    let clean: String = out.replace("\u{1b}[2;35m", "").replace("\u{1b}[0m", "");
    let field = |line: &str, key: &str| -> Option<f64> {
        let at = line.find(key)? + key.len();
        let rest = line[at..].trim_start();
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    let valid = clean
        .lines()
        .find(|l| l.contains("[Valid Duration]"))
        .ok_or_else(|| format!("sockperf printed no [Valid Duration] line: {clean:.300}"))?;
    let run = field(valid, "RunTime=").ok_or("sockperf: no RunTime")?;
    let got = field(valid, "ReceivedMessages=").ok_or("sockperf: no ReceivedMessages")?;
    let mean = clean
        .lines()
        .find_map(|l| field(l, "avg-latency="))
        .ok_or("sockperf: no avg-latency")?;
    let pct = |p: &str| {
        clean
            .lines()
            .find(|l| l.contains(&format!("percentile {p}")))
            .and_then(|l| field(l, "="))
    };
    if run <= 0.0 {
        return Err("sockperf: zero run time".into());
    }
    Ok(Sockperf {
        trans_s: got / run,
        rtt_mean_us: 2.0 * mean,
        rtt_p50_us: 2.0 * pct("50.000").unwrap_or(mean),
        rtt_p99_us: 2.0 * pct("99.000").unwrap_or(mean),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_tools_run_on_the_cpu_asked_for() {
        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu = (ncpu - 1) as u16;
        let args = pinned(
            Some(cpu),
            ["grep", "Cpus_allowed_list", "/proc/self/status"]
                .map(String::from)
                .to_vec(),
        );
        assert_eq!(args[..3], ["taskset", "-c", &cpu.to_string()]);
        let out = std::process::Command::new(&args[0])
            .args(&args[1..])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.split_whitespace().nth(1),
            Some(cpu.to_string().as_str()),
            "{text}"
        );
        let plain = vec!["iperf3".to_string()];
        assert_eq!(pinned(None, plain.clone()), plain);
    }

    #[test]
    fn sockperf_summary_is_read_as_round_trips() {
        let out = "sockperf: [Total Run] RunTime=1.001 sec; Warm up time=400 msec; SentMessages=73427; ReceivedMessages=73426\n\
            sockperf: [Valid Duration] RunTime=0.550 sec; SentMessages=41196; ReceivedMessages=41196\n\
            sockperf: \u{1b}[2;35m====> avg-latency=6.635 (std-dev=20.251)\u{1b}[0m\n\
            sockperf: ---> percentile 99.000 =   14.349\n\
            sockperf: ---> percentile 50.000 =    6.182\n";
        let r = parse_sockperf(out).unwrap();
        assert!((r.trans_s - 41196.0 / 0.550).abs() < 1e-6);
        assert!((r.rtt_mean_us - 13.27).abs() < 1e-9);
        assert!((r.rtt_p50_us - 12.364).abs() < 1e-9);
        assert!((r.rtt_p99_us - 28.698).abs() < 1e-9);
        assert!(parse_sockperf("sockperf: error").is_err());
    }

    #[test]
    fn iperf3_json_is_read_per_kind() {
        let tcp = r#"{"end":{"sum_sent":{"retransmits":3,"bits_per_second":2e9},"sum_received":{"bits_per_second":1.5e9,"seconds":2.0},
            "sum_received_bidir_reverse":{"bits_per_second":1e9},"sum_sent_bidir_reverse":{"retransmits":1}}}"#;
        let r = parse_iperf3(tcp, Kind::TcpStream).unwrap();
        assert_eq!(
            (r.bits_per_second, r.retransmits, r.seconds),
            (1.5e9, 3, 2.0)
        );
        let r = parse_iperf3(tcp, Kind::TcpBidirec).unwrap();
        assert_eq!((r.bits_per_second, r.retransmits), (2.5e9, 4));
        let udp = r#"{"end":{"sum":{"bits_per_second":1e8,"packets":1000,"lost_packets":10,"seconds":2.0}}}"#;
        let r = parse_iperf3(udp, Kind::UdpStream).unwrap();
        assert_eq!((r.packets, r.lost), (1000, 10));
        assert!((r.bits_per_second - 0.99e8).abs() < 1.0);
        let e = parse_iperf3(
            r#"{"error":"unable to connect to server"}"#,
            Kind::TcpStream,
        )
        .unwrap_err();
        assert!(e.contains("unable to connect"), "{e}");
        assert!(parse_iperf3("garbage", Kind::TcpStream).is_err());
    }
}
