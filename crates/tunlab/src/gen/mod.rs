//! `tunlab gen`: read a description (command line or profile file),
//! then show the packets layer by layer, write them to a pcap, or send
//! them ([`send`]).

mod args;
mod send;

use args::fail;
pub use args::Args;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tunlab::decode;
use tunlab_gen::{Builder, Sizes};

fn write_pcap(path: &Path, b: &Builder, count: u64, seed: u64) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        snaplen: 65535,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(std::io::BufWriter::new(file), header)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    for (n, p) in tunlab_gen::packets(b, count, seed).enumerate() {
        // One microsecond apart, so that tools keep their order.
        let ts = std::time::Duration::from_micros(n as u64);
        w.write_packet(&PcapPacket::new(ts, p.len() as u32, &p))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// A PVP node on a real host (`--hosts`), as the generator finds it.
pub struct RemoteNode {
    pub ssh: tunlab_lab::remote::Ssh,
    pub gen_ip: String,
    pub node_ip: String,
    /// The generator's interface here (it holds `gen_ip`).
    pub dev: String,
}

/// Check `--hosts`/`--underlay` (the node over SSH, changing nothing, and
/// the generator's interface here): the article's packet between the two
/// machines' addresses, and the node to start.
fn remote_node(a: &Args) -> Result<(String, RemoteNode), String> {
    let dest = a.hosts.as_deref().unwrap_or_default();
    if dest.contains(',') {
        return Err(format!(
            "--hosts: '{dest}': the PVP test has one node (USER@HOST)"
        ));
    }
    let [gen_ip, node_ip] = &a.underlay[..] else {
        return Err(format!(
            "--underlay takes GEN_IP,NODE_IP (got {} addresses)",
            a.underlay.len()
        ));
    };
    for x in [gen_ip, node_ip] {
        if x.parse::<std::net::Ipv4Addr>().is_err() {
            return Err(format!("--underlay: '{x}' is not an IPv4 address"));
        }
    }
    if let Some(c) = a.ssh_config.as_ref().filter(|c| !c.is_file()) {
        return Err(format!("--ssh-config: {}: no such file", c.display()));
    }
    let tunnel = tunlab_lab::pvp::Tunnel::parse(&a.tunnel).map_err(|e| format!("--tunnel: {e}"))?;
    let addrs = std::process::Command::new("ip")
        .args(["-o", "addr", "show"])
        .output()
        .map_err(|e| format!("ip: {e} (apt-get install iproute2)"))?;
    let addrs = String::from_utf8_lossy(&addrs.stdout);
    let dev = addrs
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let ip = f.get(3)?.split('/').next()?;
            (ip == gen_ip).then(|| f[1].split('@').next().unwrap_or(f[1]).to_string())
        })
        .ok_or_else(|| format!("--underlay: {gen_ip} is on none of this machine's interfaces"))?;
    let gen_mac = std::fs::read_to_string(format!("/sys/class/net/{dev}/address"))
        .map_err(|e| format!("{dev}: {e}"))?;
    let ssh = tunlab_lab::remote::Ssh::new(dest, a.ssh_config.clone());
    let found = tunlab_lab::remote::check(&ssh, node_ip).map_err(|e| e.to_string())?;
    let text =
        tunlab_lab::pvp::description_between(tunnel, gen_mac.trim(), gen_ip, &found.mac, node_ip);
    Ok((
        text,
        RemoteNode {
            ssh,
            gen_ip: gen_ip.clone(),
            node_ip: node_ip.clone(),
            dev,
        },
    ))
}

pub fn run(a: Args) -> ExitCode {
    let mut remote = None;
    let text = match (&a.packet, &a.profile) {
        (Some(p), None) => p.clone(),
        (None, Some(f)) => match std::fs::read_to_string(f) {
            Ok(t) => tunlab_gen::read_profile(&t),
            Err(e) => return fail(format!("{}: {e}", f.display())),
        },
        (None, None) if a.pvp && a.hosts.is_some() => match remote_node(&a) {
            Ok((text, node)) => {
                remote = Some(node);
                text
            }
            Err(e) => return fail(e),
        },
        (None, None) if a.pvp => match tunlab_lab::pvp::Tunnel::parse(&a.tunnel) {
            Ok(t) => t.description().to_string(),
            Err(e) => return fail(format!("--tunnel: {e}")),
        },
        _ => return fail("give a packet description or --profile FILE (one of them)"),
    };
    let mut sizes = Vec::new();
    for s in &a.size {
        match Sizes::parse(s) {
            Ok(s) => sizes.push(s),
            Err(e) => return fail(e),
        }
    }
    if sizes.is_empty() {
        sizes.push(Sizes::Natural);
    }
    let mut builders = Vec::new();
    for s in sizes {
        match tunlab_gen::builder(&text, s) {
            Ok(b) => builders.push(b),
            Err(e) => return fail(e),
        }
    }
    if !a.show && a.pcap.is_none() {
        return send::run(&a, &text, &builders, remote);
    }
    if builders.len() > 1 {
        return fail("--show and --pcap take one --size");
    }
    let b = &builders[0];
    let flows = b.flows();
    let count = a
        .count
        .unwrap_or_else(|| flows.min(if a.show { 8 } else { 1 << 20 }) as u64);
    if let Some(path) = &a.pcap {
        if let Err(e) = write_pcap(path, b, count, a.seed) {
            eprintln!("tunlab gen: {e}");
            return ExitCode::FAILURE;
        }
        eprintln!(
            "tunlab gen: {count} packets of {flows} flows written to {}",
            path.display()
        );
    }
    if a.show {
        println!("{flows} flows; showing {count} packets (packet n is flow n mod {flows})");
        let mut out = String::new();
        for (n, p) in tunlab_gen::packets(b, count, a.seed).enumerate() {
            out.clear();
            let f = decode::decode_frame(n + 1, &p, p.len());
            decode::render_text(&f, &mut out);
            print!("{out}");
        }
    }
    ExitCode::SUCCESS
}

/// `tunlab bench --pvp`: the PVP zero-loss search with the profile's trial
/// lengths, through the same path as `tunlab gen --pvp --ndr --io auto
/// --threads CPUS --reflector xdp`, once with the node on the kernel
/// (eBPF) datapath and once on the userspace one, then the two side by
/// side.
pub fn bench_pvp(profile: &str, out: Option<PathBuf>) -> ExitCode {
    #[derive(Debug, clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        args: Args,
    }
    use clap::Parser;
    // The article's frame sizes (its packet needs 104 bytes, so no 64).
    let (trial, validation, sizes) = match profile {
        "quick" => ("2", "5", "128,512,1500"),
        "full" => ("30", "30", "128,256,512,1024,1500,9000"),
        p => return fail(format!("--profile: '{p}' is not a profile: quick, full")),
    };
    let out = out.unwrap_or_else(tunlab_lab::run::default_out);
    if let Err(e) = std::fs::create_dir_all(&out) {
        return fail(format!("{}: {e}", out.display()));
    }
    let mut found: Vec<(&str, Vec<ZeroLoss>)> = Vec::new();
    for node in ["ebpf", "userspace"] {
        let json = out.join(format!("pvp-{node}.json"));
        // The generator at its fastest on this machine: AF_XDP where the
        // wire takes it, a sender per CPU (on veth each sender's CPU
        // carries its frames' whole round trip), the tenant reflecting
        // in XDP so that the node, not the tenant, sets the rate.
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8)
            .to_string();
        let argv = [
            "gen",
            "--pvp",
            "--node",
            node,
            "--io",
            "auto",
            "--threads",
            &threads,
            "--reflector",
            "xdp",
            "--ndr",
            "--size",
            sizes,
            "--trial",
            trial,
            "--validation",
            validation,
            "--json",
            json.to_str().unwrap_or("pvp.json"),
        ];
        println!("PVP, the node on the {node} datapath:");
        let code = match Wrap::try_parse_from(argv) {
            Ok(w) => run(w.args),
            Err(e) => return fail(e),
        };
        if code != ExitCode::SUCCESS {
            return code;
        }
        match zero_loss_rates(&json) {
            Ok(r) => found.push((node, r)),
            Err(e) => return fail(format!("{}: {e}", json.display())),
        }
    }
    println!("\nPVP zero-loss rate, side by side (kfps):");
    println!(
        "{:>10} {:>12} {:>12} {:>8}",
        "Frame (B)", "ebpf", "userspace", "ratio"
    );
    if let [(_, k), (_, u)] = &found[..] {
        for (a, b) in k.iter().zip(u) {
            let kfps = |r: &ZeroLoss| {
                r.rate_pps.map_or("none".into(), |p| {
                    format!(
                        "{}{:.1}",
                        if r.generator_limited { ">=" } else { "" },
                        p / 1e3
                    )
                })
            };
            let ratio = match (a.rate_pps, b.rate_pps) {
                (Some(x), Some(y)) if y > 0.0 => format!(
                    "{}{:.2}x",
                    if a.generator_limited && !b.generator_limited {
                        ">="
                    } else {
                        ""
                    },
                    x / y
                ),
                _ => "-".into(),
            };
            println!("{:>10} {:>12} {:>12} {ratio:>8}", a.size, kfps(a), kfps(b));
        }
        if k.iter().chain(u).any(|r| r.generator_limited) {
            println!(
                "  >=: no loss at the generator's top rate; the node may pass more than this \
                 generator sends here"
            );
        }
    }
    ExitCode::SUCCESS
}

/// A frame size's zero-loss rate (frames/s), if one passed, and whether
/// the generator's top rate passed (then the rate is a lower bound).
#[derive(Debug)]
struct ZeroLoss {
    size: String,
    rate_pps: Option<f64>,
    generator_limited: bool,
}

/// Each row's frame size and zero-loss rate from `tunlab gen --json`.
fn zero_loss_rates(json: &std::path::Path) -> Result<Vec<ZeroLoss>, String> {
    let text = std::fs::read_to_string(json).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let rows = v["rows"].as_array().ok_or("no rows")?;
    Ok(rows
        .iter()
        .map(|r| ZeroLoss {
            size: r["frame_size"].as_str().unwrap_or("?").to_string(),
            rate_pps: r["search"]["rate_pps"].as_f64(),
            generator_limited: r["search"]["generator_limited"].as_bool().unwrap_or(false),
        })
        .collect())
}

static REFLECT_STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn stop_reflecting(_: nix::libc::c_int) {
    REFLECT_STOP.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// `tunlab reflect IF[@NETNS]`: the PVP tenant as a command of its own
/// (the PVP test on a remote node runs it there).
pub fn reflect(at: &str, reflector: &str) -> ExitCode {
    use nix::sys::signal::{signal, SigHandler, Signal};
    let at = match tunlab_gen::send::Endpoint::parse(at) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("tunlab reflect: {e}");
            return ExitCode::from(2);
        }
    };
    let kind = match tunlab_lab::pvp::Reflector::parse(reflector) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("tunlab reflect: --reflector: {e}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: the handler only stores to an atomic, which is
    // async-signal-safe.
    unsafe {
        let _ = signal(Signal::SIGINT, SigHandler::Handler(stop_reflecting));
        let _ = signal(Signal::SIGTERM, SigHandler::Handler(stop_reflecting));
    }
    let ready = |r: Result<(), String>| {
        if r.is_ok() {
            println!("ready");
            let _ = std::io::Write::flush(&mut std::io::stdout());
        }
    };
    let done = match kind {
        tunlab_lab::pvp::Reflector::Ring => tunlab_gen::reflect::run(&at, &REFLECT_STOP, ready),
        tunlab_lab::pvp::Reflector::Xdp => tunlab_gen::reflect::run_xdp(&at, &REFLECT_STOP, ready),
    };
    match done {
        Ok(r) => {
            println!("reflected {} frames, lost {}", r.frames, r.dropped);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tunlab reflect: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_loss_rates_say_when_the_generator_was_the_limit() {
        let path = std::env::temp_dir().join(format!("tunlab-zl-{}.json", std::process::id()));
        std::fs::write(
            &path,
            r#"{"rows": [
                {"frame_size": "128", "search": {"rate_pps": 277800.0, "generator_limited": true}},
                {"frame_size": "512", "search": {"rate_pps": 83600.0, "generator_limited": false}},
                {"frame_size": "1500", "search": {"rate_pps": null, "generator_limited": false}}
            ]}"#,
        )
        .unwrap();
        let r = zero_loss_rates(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].size.as_str(), r[0].rate_pps), ("128", Some(277800.0)));
        assert!(r[0].generator_limited && !r[1].generator_limited);
        assert_eq!(r[2].rate_pps, None);
    }
}
