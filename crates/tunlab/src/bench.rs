//! `tunlab bench`: turn the command line into a plan, run it, print the
//! tables. Ctrl-C stops the running tools, tears everything down and
//! still writes what was measured.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tunlab_lab::plan::Plan;
use tunlab_lab::remote::Ssh;
use tunlab_lab::results::Results;
use tunlab_lab::run;
use tunlab_lab::sample::Test;
use tunlab_lab::traffic::INTERRUPTED;
use tunlab_lab::variant::Variant;

#[derive(Debug)]
pub struct Args {
    pub profile: String,
    pub variants: Vec<String>,
    pub tests: Vec<String>,
    pub rounds: Option<usize>,
    pub budget: Option<u64>,
    pub seconds: Option<u32>,
    pub baseline: String,
    pub seed: Option<u64>,
    pub workers: Option<u16>,
    pub spin_us: Option<u64>,
    pub tenant_cpus: Option<String>,
    pub out: Option<PathBuf>,
    /// Real hosts to run on instead of namespaces here.
    pub hosts: Option<HostArgs>,
    /// With hosts: print what would run on them, run nothing.
    pub plan_only: bool,
}

extern "C" fn on_interrupt(_: nix::libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// What every lab command does first: find the tunlab binary (the
/// switch and the generator it starts) and make Ctrl-C and SIGTERM stop
/// the run cleanly instead of killing it.
pub(crate) fn start(cmd: &str) -> Result<PathBuf, ExitCode> {
    use nix::sys::signal::{signal, SigHandler, Signal};
    let tunlab = std::env::current_exe().map_err(|e| {
        eprintln!("tunlab {cmd}: cannot find the tunlab binary: {e}");
        ExitCode::FAILURE
    })?;
    // SAFETY: the handler only stores to an atomic, which is
    // async-signal-safe.
    unsafe {
        let _ = signal(Signal::SIGINT, SigHandler::Handler(on_interrupt));
        let _ = signal(Signal::SIGTERM, SigHandler::Handler(on_interrupt));
    }
    Ok(tunlab)
}

fn plan(a: &Args) -> Result<Plan, String> {
    let mut plan = Plan::profile(&a.profile).map_err(|e| e.to_string())?;
    if !a.variants.is_empty() {
        plan.variants = a
            .variants
            .iter()
            .map(|v| Variant::parse(v))
            .collect::<Result<_, _>>()?;
    }
    if !a.tests.is_empty() {
        plan.tests = a
            .tests
            .iter()
            .map(|t| Test::parse(t))
            .collect::<Result<_, _>>()?;
    }
    if let Some(n) = a.rounds {
        if n == 0 || n > 200 {
            return Err(format!("--rounds: {n} is not between 1 and 200"));
        }
        plan.rule.min_rounds = n;
        plan.rule.max_rounds = n;
        plan.rule.budget_s = None;
    }
    if let Some(b) = a.budget {
        if b > 7 * 24 * 3600 {
            return Err(format!("--budget: {b} s is over a week"));
        }
        plan.rule.budget_s = (b > 0).then_some(b);
        // A longer budget is there to be used: up to 200 rounds.
        plan.rule.max_rounds = plan.rule.max_rounds.max(200);
    }
    if let Some(s) = a.seconds {
        if s == 0 || s > 3600 {
            return Err(format!("--seconds: {s} is not between 1 and 3600"));
        }
        plan.seconds = s;
    }
    if let Some(w) = a.workers {
        let max = tunlab_switch::config::MAX_WORKERS;
        if w == 0 || w > max {
            return Err(format!("--workers: {w} is not between 1 and {max}"));
        }
        plan.workers = Some(w);
    }
    if let Some(s) = a.spin_us {
        if s > 1_000_000 {
            return Err(format!("--spin-us: {s} is over 1000000 (one second)"));
        }
        plan.spin_us = Some(s);
    }
    if let Some(c) = &a.tenant_cpus {
        plan.tenant_cpus = Some(parse_cpus(
            c,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        )?);
    }
    plan.baseline = Some(Variant::parse(&a.baseline).map_err(|e| format!("--baseline: {e}"))?);
    plan.seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    Ok(plan)
}

/// `--tenant-cpus CLIENT,SERVER`: two CPU numbers below `ncpu`.
fn parse_cpus(s: &str, ncpu: usize) -> Result<[u16; 2], String> {
    let bad = |why: String| format!("--tenant-cpus '{s}': {why}; expected CLIENT,SERVER, e.g. 0,1");
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let [c, v] = parts[..] else {
        return Err(bad(format!("{} numbers given", parts.len())));
    };
    let mut out = [0u16; 2];
    for (o, p) in out.iter_mut().zip([c, v]) {
        let n: u16 = p
            .parse()
            .map_err(|_| bad(format!("'{p}' is not a CPU number")))?;
        if n as usize >= ncpu {
            return Err(bad(format!(
                "CPU {n} does not exist (this machine has {ncpu})"
            )));
        }
        *o = n;
    }
    Ok(out)
}

pub fn run(a: Args) -> ExitCode {
    let plan = match plan(&a) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("tunlab bench: {e}");
            return ExitCode::from(2);
        }
    };
    let tunlab = match start("bench") {
        Ok(t) => t,
        Err(code) => return code,
    };
    let _one_connection_per_host = a
        .hosts
        .as_ref()
        .and_then(|_| tunlab_lab::remote::share_connections());
    let remote = match &a.hosts {
        None => None,
        Some(h) => {
            let (hosts, underlay) = match h.parsed() {
                Ok(x) => x,
                Err(code) => return code,
            };
            let ovs = match h.ovs_underlay() {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("tunlab bench: {e}");
                    return ExitCode::from(2);
                }
            };
            if a.plan_only {
                tunlab_lab::remote::plan_only();
            }
            match tunlab_lab::remote::Remote::prepare(hosts, underlay, ovs, &tunlab) {
                Ok(r) => Some(r),
                Err(e) => {
                    eprintln!("tunlab bench: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    };
    let out = a.out.clone().unwrap_or_else(run::default_out);
    match &remote {
        Some(r) => {
            let ours = format!("tunlab {}", env!("CARGO_PKG_VERSION"));
            print!("{}", tunlab_lab::remote::table(&r.found, &ours));
            println!("\n{}\n", run::remote_topology(r));
        }
        None => println!("{}\n", run::TOPOLOGY),
    }
    println!("profile {}: {}", plan.profile, plan.method());
    if plan.baseline_index().is_none() {
        println!(
            "(the baseline {} is not among the variants: --baseline names the variant the others are paired with)",
            a.baseline
        );
    }
    let settings = plan.settings();
    if !settings.is_empty() {
        println!("{settings}");
    }
    if let Some(r) = remote.as_ref().filter(|_| a.plan_only) {
        return match run::print_plan(&plan, &tunlab, &out, r) {
            Ok(()) => {
                println!("\n(--plan: nothing was run on either host; they were only checked)");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("tunlab bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let results = match run::run(&plan, &tunlab, &out, remote.as_ref(), None) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tunlab bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "{}",
        tunlab_lab::report::tables(&results, Some(&a.baseline))
    );
    println!(
        "every sample and the environment: {}",
        out.join("results.json").display()
    );
    if !write_report(&results, &a.baseline, &out) {
        return ExitCode::FAILURE;
    }
    if let Some(why) = &results.stopped {
        eprintln!(
            "tunlab bench: stopped: {why}; the results above are partial. What the run made on the hosts was removed where they answered; `tunlab bench --hosts … --cleanup` removes the rest once they are back"
        );
        return ExitCode::FAILURE;
    }
    if results.interrupted {
        eprintln!("tunlab bench: interrupted; the results above are partial");
        return ExitCode::from(130);
    }
    ExitCode::SUCCESS
}

/// Write report.html and the charts into `dir`, and say where they are.
fn write_report(r: &Results, baseline: &str, dir: &Path) -> bool {
    match tunlab_lab::html::write(r, Some(baseline), dir) {
        Ok(w) => {
            println!(
                "report: {} ({} charts in {} as SVG and PNG)",
                w.html.display(),
                w.charts,
                dir.join("charts").display()
            );
            for e in &w.png_errors {
                eprintln!("tunlab: no PNG for {e}");
            }
            true
        }
        Err(e) => {
            eprintln!("tunlab: cannot write the report: {e}");
            false
        }
    }
}

/// `tunlab report results.json`.
pub fn report(file: &Path, baseline: &str, out: Option<&Path>) -> ExitCode {
    let r = match Results::load(file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tunlab report: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !r.variants.iter().any(|v| v.variant == baseline) {
        eprintln!(
            "tunlab report: --baseline: '{baseline}' is not in this run; it has {}",
            r.variants
                .iter()
                .map(|v| v.variant.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::from(2);
    }
    println!("{}", tunlab_lab::report::tables(&r, Some(baseline)));
    let dir = out
        .map(Path::to_path_buf)
        .or_else(|| file.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    if write_report(&r, baseline, &dir) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `tunlab compare a.json b.json`.
pub fn compare(a: &Path, b: &Path) -> ExitCode {
    match (Results::load(a), Results::load(b)) {
        (Ok(x), Ok(y)) => {
            print!("{}", tunlab_lab::compare::text(&x, &y));
            ExitCode::SUCCESS
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("tunlab compare: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cpus;

    #[test]
    fn tenant_cpus_are_two_existing_cpus() {
        assert_eq!(parse_cpus("0,1", 2), Ok([0, 1]));
        assert_eq!(parse_cpus(" 1 , 1 ", 2), Ok([1, 1]));
        let e = parse_cpus("0,2", 2).unwrap_err();
        assert!(
            e.contains("CPU 2 does not exist (this machine has 2)"),
            "{e}"
        );
        let e = parse_cpus("0", 2).unwrap_err();
        assert!(e.contains("1 numbers given"), "{e}");
        let e = parse_cpus("0,x", 2).unwrap_err();
        assert!(e.contains("'x' is not a CPU number"), "{e}");
        assert!(parse_cpus("0,1,1", 2).is_err());
        assert!(parse_cpus("-1,0", 2).is_err());
    }
}

/// `tunlab soak`'s command line.
#[derive(Debug, clap::Args)]
pub struct SoakArgs {
    /// How long: 180, 180s, 3m, 1h (at least 30 s).
    #[arg(long, default_value = "30m")]
    pub duration: String,
    /// The tunlab variant (tunlab-ebpf-geneve: the kernel datapath).
    #[arg(long, default_value = "tunlab-ebpf-geneve")]
    pub variant: String,
    /// The generator's rate, frames/s.
    #[arg(long, default_value_t = 20_000)]
    pub rate: u64,
    /// The generator's UDP flows (source ports).
    #[arg(long, default_value_t = 1000)]
    pub flows: u32,
    /// iperf3 streams.
    #[arg(long, default_value_t = 2)]
    pub streams: u32,
    /// Each iperf3 stream's limit, Mbit/s.
    #[arg(long, default_value_t = 200)]
    pub stream_mbps: u32,
    /// The flow change every second: mask (a rule on UDP ports under the
    /// rules, added and deleted: a rule of a new shape), actions (a rule of
    /// the rules' own shape), above (a rule of a new shape above the rules
    /// that no traffic matches: every cached flow of the port is rebuilt
    /// under a new mask) or none (a quiet period to compare with). All are
    /// revalidated flow by flow.
    #[arg(long, default_value = "mask")]
    pub change: String,
    /// The results folder (default tunlab-results/UNIX-TIME).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn soak_plan(a: &SoakArgs) -> Result<tunlab_lab::soak::Plan, String> {
    let duration =
        tunlab_lab::soak::parse_duration(&a.duration).map_err(|e| format!("--duration: {e}"))?;
    let variant = Variant::parse(&a.variant).map_err(|e| format!("--variant: {e}"))?;
    if !(1..=10_000_000).contains(&a.rate) {
        return Err(format!(
            "--rate: {} is not between 1 and 10000000 frames/s",
            a.rate
        ));
    }
    if !(1..=50_000).contains(&a.flows) {
        return Err(format!("--flows: {} is not between 1 and 50000", a.flows));
    }
    if !(1..=16).contains(&a.streams) {
        return Err(format!("--streams: {} is not between 1 and 16", a.streams));
    }
    if !(1..=100_000).contains(&a.stream_mbps) {
        return Err(format!(
            "--stream-mbps: {} is not between 1 and 100000",
            a.stream_mbps
        ));
    }
    Ok(tunlab_lab::soak::Plan {
        variant,
        duration,
        gen_pps: a.rate,
        gen_flows: a.flows,
        streams: a.streams,
        stream_mbps: a.stream_mbps,
        change: tunlab_lab::soak::FlowChange::parse(&a.change)
            .map_err(|e| format!("--change: {e}"))?,
    })
}

pub fn soak(a: SoakArgs) -> ExitCode {
    let plan = match soak_plan(&a) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("tunlab soak: {e}");
            return ExitCode::from(2);
        }
    };
    let tunlab = match start("soak") {
        Ok(t) => t,
        Err(code) => return code,
    };
    let out = a.out.clone().unwrap_or_else(run::default_out);
    println!(
        "soak: {} for {:.0} s; the generator at {} frames/s over {} flows, {} iperf3 stream(s) of {} Mbit/s, a flow change ({}) every second",
        plan.variant.name(),
        plan.duration.as_secs_f64(),
        plan.gen_pps,
        plan.gen_flows,
        plan.streams,
        plan.stream_mbps,
        plan.change.name()
    );
    let s = match tunlab_lab::soak::run(&plan, &tunlab, &out) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tunlab soak: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = tunlab_lab::soak::report::write(&s, &out) {
        eprintln!("tunlab soak: {e}");
        return ExitCode::FAILURE;
    }
    for c in &s.checks {
        println!(
            "{:<4} {:<48} {}",
            if c.held { "ok" } else { "FAIL" },
            c.what,
            c.detail
        );
    }
    println!(
        "\nresults: {}/soak.json, {}/soak.html",
        out.display(),
        out.display()
    );
    if s.interrupted {
        eprintln!("tunlab soak: interrupted; no checks made");
        return ExitCode::from(130);
    }
    if s.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `tunlab bench --setup-rate`.
pub fn setup_rate(profile: &str, variants: &[String], out: Option<PathBuf>) -> ExitCode {
    let flows = match profile {
        "quick" => 20_000,
        "full" => 100_000,
        p => {
            eprintln!("tunlab bench: --profile: '{p}' is not a profile: quick, full");
            return ExitCode::from(2);
        }
    };
    let names: Vec<String> = if variants.is_empty() {
        vec!["tunlab-ebpf-geneve".into(), "ovs-geneve".into()]
    } else {
        variants.to_vec()
    };
    let mut vs = Vec::new();
    for n in &names {
        match Variant::parse(n) {
            Ok(v) if v.is_ebpf() || v.is_ovs() => vs.push(v),
            Ok(_) => {
                eprintln!("tunlab bench: --setup-rate: {n} keeps no flow cache (a tunlab-ebpf-* or ovs-* variant does)");
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("tunlab bench: --variants: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let tunlab = match start("bench") {
        Ok(t) => t,
        Err(code) => return code,
    };
    let out = out.unwrap_or_else(run::default_out);
    let plan = tunlab_lab::setup_rate::Plan {
        variants: vs,
        flows,
        min_rate: 5_000,
        max_rate: 400_000,
        granularity_pct: 5.0,
    };
    println!(
        "flow set-up rate: binary search per variant, {flows} new flows a trial (a few minutes)"
    );
    let found = match tunlab_lab::setup_rate::run(&plan, &tunlab, &out) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("tunlab bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", tunlab_lab::setup_rate::table(&found, flows));
    let path = out.join("setup-rate.json");
    match serde_json::to_string_pretty(&found) {
        Ok(j) => {
            if let Err(e) = std::fs::write(&path, j) {
                eprintln!("tunlab bench: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
        Err(e) => {
            eprintln!("tunlab bench: {e}");
            return ExitCode::FAILURE;
        }
    }
    println!("\nresults: {}", path.display());
    if found.iter().any(|f| f.error.is_some()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `--hosts A,B --underlay IP1,IP2 [--ssh-config FILE]`: the two real
/// hosts to run on.
#[derive(Debug, Clone)]
pub struct HostArgs {
    pub hosts: Vec<String>,
    pub underlay: Vec<String>,
    pub ssh_config: Option<PathBuf>,
    /// `--ovs-underlay IP1,IP2`: Open vSwitch's own underlay addresses.
    pub ovs_underlay: Vec<String>,
}

impl HostArgs {
    /// [`HostArgs::parse`], its error printed: exit code 2.
    fn parsed(&self) -> Result<([Ssh; 2], [String; 2]), ExitCode> {
        self.parse().map_err(|e| {
            eprintln!("tunlab bench: {e}");
            ExitCode::from(2)
        })
    }

    /// `--ovs-underlay`, checked: two addresses, or none given.
    fn ovs_underlay(&self) -> Result<Option<[String; 2]>, String> {
        match &self.ovs_underlay[..] {
            [] => Ok(None),
            [a, b] => {
                for x in [a, b] {
                    if x.parse::<std::net::IpAddr>().is_err() {
                        return Err(format!("--ovs-underlay: '{x}' is not an IP address"));
                    }
                    if self.underlay.contains(x) {
                        return Err(format!(
                            "--ovs-underlay: {x} is a host's own underlay address; Open vSwitch needs addresses of its own"
                        ));
                    }
                }
                Ok(Some([a.clone(), b.clone()]))
            }
            x => Err(format!(
                "--ovs-underlay takes two addresses, one per host (got {})",
                x.len()
            )),
        }
    }

    /// Two destinations and two addresses, checked before any SSH.
    fn parse(&self) -> Result<([Ssh; 2], [String; 2]), String> {
        let (h, u) = (&self.hosts, &self.underlay);
        if h.len() != 2 || u.len() != 2 {
            return Err(format!(
                "--hosts takes two hosts and --underlay their two addresses (got {} and {})",
                h.len(),
                u.len()
            ));
        }
        if let Some((i, a)) = u
            .iter()
            .enumerate()
            .find(|(_, a)| a.parse::<std::net::IpAddr>().is_err())
        {
            return Err(format!(
                "--underlay: '{a}' (for {}) is not an IP address",
                h[i]
            ));
        }
        if let Some(c) = self.ssh_config.as_ref().filter(|c| !c.is_file()) {
            return Err(format!("--ssh-config: {}: no such file", c.display()));
        }
        let ssh = |i: usize| Ssh::new(&h[i], self.ssh_config.clone());
        Ok(([ssh(0), ssh(1)], [u[0].clone(), u[1].clone()]))
    }
}

/// `tunlab bench --hosts A,B --underlay IP1,IP2 --check`: each host
/// checked over SSH, nothing changed; a table, and the exit code says
/// whether both are ready.
pub fn check_hosts(h: &HostArgs) -> ExitCode {
    let (hosts, underlay) = match h.parsed() {
        Ok(x) => x,
        Err(code) => return code,
    };
    let mut found = Vec::new();
    let mut failed = false;
    for (ssh, u) in hosts.iter().zip(&underlay) {
        match tunlab_lab::remote::check(ssh, u) {
            Ok(p) => {
                failed |= !p.missing.is_empty();
                found.push(p);
            }
            Err(e) => {
                eprintln!("tunlab bench: {e}");
                failed = true;
            }
        }
    }
    let ours = format!("tunlab {}", env!("CARGO_PKG_VERSION"));
    print!("{}", tunlab_lab::remote::table(&found, &ours));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `tunlab bench --hosts A,B --underlay … --cleanup`: remove from both
/// hosts what killed runs left there (only names this lab makes).
pub fn cleanup_hosts(h: &HostArgs) -> ExitCode {
    let (hosts, _) = match h.parsed() {
        Ok(x) => x,
        Err(code) => return code,
    };
    let mut code = ExitCode::SUCCESS;
    for ssh in &hosts {
        match tunlab_lab::remote::cleanup(ssh) {
            Ok(gone) if gone.is_empty() => println!("{}: nothing left by tunlab", ssh.dest),
            Ok(gone) => println!("{}: removed {}", ssh.dest, gone.join(", ")),
            Err(e) => {
                eprintln!("tunlab bench: {e}");
                code = ExitCode::FAILURE;
            }
        }
    }
    code
}
