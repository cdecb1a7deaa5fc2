//! The `tunlab` command line: argument parsing and dispatch only.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tunlab::{capture, decode};

mod article;
mod bench;
mod gen;
mod manpages;
mod notify;
mod rr;
mod switch;

/// tunlab: a tunnel switch (Geneve, VXLAN, GRE/NVGRE, STT, QinQ) with an
/// eBPF datapath, the lab that measures it, and a traffic generator.
///
/// The switch (`switch`, `ctl`; OpenFlow on its management socket), the
/// lab (`bench`, `report`, `compare`, `soak`) with the kernel's VXLAN,
/// Open vSwitch and tunlab side by side, the generator (`gen`: build,
/// show, write, send and count, zero-loss search; `reflect`), and
/// `decode`. Not built yet: connection tracking in the datapaths (the
/// switch traces `ct`, and drops what reaches it), OVN's groups and learn.
#[derive(Debug, Parser)]
#[command(name = "tunlab", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of its largest variant (bench's
// arguments) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Print every frame of a pcap or pcapng file layer by layer, every field
    /// (outer Ethernet, 802.1Q/802.1ad, IPv4/IPv6, UDP/TCP/GRE, the tunnel
    /// header with its options, then the inner frame), like scapy's show().
    ///
    /// Exits 1 if any frame is malformed or the file is damaged, after
    /// printing everything it could decode.
    Decode {
        /// The capture to read (pcap or pcapng): Ethernet (its FCS too,
        /// where the file says it is kept), Linux cooked v1 and v2 (`tcpdump
        /// -i any`), raw IP, or BSD null/loopback.
        file: PathBuf,
        /// Print JSON (one object per frame, in an array) instead of text.
        #[arg(long)]
        json: bool,
        /// Read a tunnel on another port, in tshark's spelling:
        /// `udp.port==N,vxlan`, `udp.port==N,geneve`, `tcp.port==N,stt`
        /// (repeatable). VXLAN on UDP 4789 and 8472 (the Linux kernel's
        /// default), Geneve on 6081 and STT on 7471 are read without it.
        #[arg(long = "decode-as", short = 'd', value_name = "FIELD==PORT,PROTO")]
        decode_as: Vec<String>,
    },
    /// Rebuild the reference articles' two-hypervisor experiments in network
    /// namespaces and compare datapaths side by side: no tunnel, the
    /// kernel's VXLAN, Open vSwitch's userspace datapath and tunlab's
    /// switch, per encapsulation.
    ///
    /// Every variant is set up side by side; samples are taken in rounds,
    /// each round measuring every variant and test once in a shuffled
    /// order, so that each round gives one ratio per variant against the
    /// baseline. A cell reports the ratios' geometric mean with its 95 %
    /// interval and a verdict (faster, slower, same); rounds go on while an
    /// interval is wider than ±5 % (quick: at least 5, at most 40, within
    /// 270 s). A sample taken while something outside the lab used over 5 %
    /// of the machine, or steal did, is marked and taken again. Results go
    /// to OUT/results.json with every sample and the environment.
    Bench {
        /// quick (the default, a few minutes) or full (the whole matrix).
        #[arg(long, default_value = "quick")]
        profile: String,
        /// Only these variants, comma-separated (e.g. none,kernel-vxlan,tunlab-geneve-ovn).
        #[arg(long, value_delimiter = ',')]
        variants: Vec<String>,
        /// Only these tests, comma-separated, named KIND-SIZEB-Ni[@RATEG]
        /// (e.g. tcp_rr-1024B-8i, tcp_stream-16384B-1i@2G).
        #[arg(long, value_delimiter = ',')]
        tests: Vec<String>,
        /// Exactly this many rounds, instead of the profile's rule.
        #[arg(long, visible_alias = "samples")]
        rounds: Option<usize>,
        /// Seconds the whole run may take (quick: 270); rounds go on while
        /// an interval is wider than ±5 % and the next round fits. 0: no
        /// limit, up to the profile's most rounds.
        #[arg(long, value_name = "SECONDS", conflicts_with = "rounds")]
        budget: Option<u64>,
        /// Seconds per sample (default: 1 quick, 5 full; CPU at a fixed
        /// rate at least 10).
        #[arg(long)]
        seconds: Option<u32>,
        /// The variant the others are paired with, round by round.
        #[arg(long, default_value = "kernel-vxlan")]
        baseline: String,
        /// The seed of the rounds' shuffled orders (default: from the
        /// clock; results.json keeps it).
        #[arg(long)]
        seed: Option<u64>,
        /// Packet threads per tunlab node (default: the switch's, 1).
        #[arg(long)]
        workers: Option<u16>,
        /// tunlab nodes poll without sleeping this many µs after traffic
        /// (default: the switch's, 50).
        #[arg(long)]
        spin_us: Option<u64>,
        /// Pin the tenants' tools: client to CPU C, server to CPU S
        /// (`taskset`; default: the scheduler places them). The kernel's
        /// own paths depend on it: see docs/results/kernel-datapath.md.
        #[arg(long, value_name = "C,S")]
        tenant_cpus: Option<String>,
        /// The results folder (default tunlab-results/UNIX-TIME).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Remove the namespaces a killed run left behind, and exit (with
        /// --hosts: what runs left on those hosts).
        #[arg(long)]
        cleanup: bool,
        /// Run the TRex article's PVP test instead: `tunlab gen --pvp`'s
        /// zero-loss search per frame size (quick: 128, 512, 1500 bytes,
        /// 2 s trials, 5 s validation; full: the article's six sizes and
        /// trafficgen's 30 s and 30 s), the node on the eBPF datapath and
        /// then on the userspace one, side by side; results in
        /// OUT/pvp-ebpf.json and OUT/pvp-userspace.json.
        #[arg(long, conflicts_with_all = ["variants", "tests", "rounds", "budget", "seconds"])]
        pvp: bool,
        /// Rebuild a reference article's experiment and check its
        /// findings here: geneve-vs-vxlan, vxlan-offload, trex-geneve-pvp,
        /// qinq, stt-gre, or all (comma-separated). Each finding gets a
        /// verdict: holds here (its 95 % interval clear of the article's
        /// line), does not hold here (with the figure: ruled out, or not
        /// shown where the interval reaches the line), or cannot be tested
        /// here (and what would test it).
        /// OUT/NAME/article.html shows the article's setup beside this
        /// one's; --profile quick (the default) takes a few minutes an
        /// article, full the article's whole matrix; --rounds and --budget
        /// apply to each article's lab run.
        #[arg(long, value_name = "NAME", conflicts_with_all = ["variants", "tests", "seconds", "pvp", "baseline", "tenant_cpus", "workers", "spin_us"])]
        article: Option<String>,
        /// The same as --profile quick.
        #[arg(long, conflicts_with = "profile")]
        quick: bool,
        /// Measure the flow set-up rate instead: the highest rate of new
        /// flows (each one's first frame a cache miss) a caching datapath
        /// takes with no frame lost, by binary search, caches emptied
        /// before each trial; --variants (default
        /// tunlab-ebpf-geneve,ovs-geneve) side by side (quick: 20,000 new
        /// flows a trial; full: 100,000). Results in OUT/setup-rate.json.
        #[arg(long, conflicts_with_all = ["tests", "rounds", "budget", "seconds", "pvp"])]
        setup_rate: bool,
        /// Run on two real hosts instead, as `ssh` takes them
        /// (USER@HOST1,USER@HOST2; your keys, agent and ssh config apply):
        /// a tenant namespace on each, the datapath on the real underlay,
        /// CPU measured on each host. tunlab is copied over unless the
        /// host has this version. Not built over SSH yet: the first-packet
        /// test, --pvp, --setup-rate and --article.
        #[arg(long, value_delimiter = ',', requires = "underlay")]
        hosts: Vec<String>,
        /// The hosts' underlay addresses (IP1,IP2), each checked to be on
        /// its host.
        #[arg(long, value_delimiter = ',', requires = "hosts")]
        underlay: Vec<String>,
        /// A config file for ssh (`ssh -F FILE`).
        #[arg(long, requires = "hosts")]
        ssh_config: Option<PathBuf>,
        /// With --hosts: two free addresses on the underlay's subnet
        /// (IP1,IP2) for Open vSwitch's tunnel endpoints, which live on its
        /// br-phy bridge over a macvlan of each NIC (the hosts' own NICs
        /// and addresses are left alone). Without them the ovs-* variants
        /// are skipped on real hosts.
        #[arg(long, value_delimiter = ',', requires = "hosts")]
        ovs_underlay: Vec<String>,
        /// With --hosts: check each host over SSH (kernel, CPUs, the
        /// interface holding its underlay address, the lab's tools, with
        /// the command that installs a missing one) and exit.
        #[arg(long, requires = "hosts")]
        check: bool,
        /// With --hosts: check the hosts, then print every command the run
        /// would send to each (set-up, tools, tear-down) and run none.
        #[arg(long, requires = "hosts", conflicts_with_all = ["check", "cleanup"])]
        plan: bool,
    },
    /// Run the lab's two hypervisors under mixed traffic for a long time:
    /// the generator's UDP flows and rate-limited iperf3 streams, a flow
    /// rule added or deleted every second, each switch's memory,
    /// descriptors, BPF maps, cached flows and counters sampled every
    /// second.
    ///
    /// At the end it checks that every frame sent was received or counted
    /// in a drop reason, that no iperf3 interval went without data, that
    /// memory and descriptors stayed flat, that every flow change was
    /// accepted and that the teardown left no BPF map behind; exit status
    /// 1 when a check failed. OUT/soak.json, OUT/soak.html and
    /// OUT/charts/soak-*.svg|png hold the curves.
    Soak(bench::SoakArgs),
    /// Make the tables, the HTML report and the charts of a finished run
    /// again from its results.json (into the same folder unless --out).
    Report {
        /// A results.json written by `tunlab bench`.
        file: PathBuf,
        /// The variant the others are compared against.
        #[arg(long, default_value = "kernel-vxlan")]
        baseline: String,
        /// Where report.html and charts/ go (default: beside the file).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Show what changed between two runs (two revisions, two machines):
    /// every test both ran, the change in percent, and whether it is
    /// larger than the noise (Welch's t-test on the samples, 95 %).
    Compare {
        /// The earlier run's results.json.
        a: PathBuf,
        /// The later run's results.json.
        b: PathBuf,
    },
    /// Build TRex-style traffic from a scapy-style description: layers
    /// joined by '/', fields as name=value, ranges (src=10.0.0.1-10.0.0.254,
    /// vni=1-4096), lists (dport=[80,443]) and random (sport=random) make
    /// many flows.
    ///
    /// Layers: Ether, Dot1Q, Dot1AD, IP, IPv6, UDP, TCP, GENEVE (opt=ovn(ingress=N,egress=N)
    /// or tlv(class=,type=,data=b"..."), or the TRex article's options_class/
    /// options_type/options_len/options_data), VXLAN, GRE, NVGRE, STT, Raw, pad.
    /// Lengths, checksums and next-protocol fields are filled in as scapy
    /// does.
    ///
    /// --show prints the packets, --pcap writes them; otherwise gen sends
    /// them through AF_PACKET TX rings (qdisc bypassed, --threads senders)
    /// at --rate for --duration or --count, counts them on --rx by the
    /// 16-byte signature each frame carries at its end (per flow, loss,
    /// duplicates, reordering, latency), and prints a table per frame size.
    /// --ndr / --pdr PCT search for the highest rate within the loss
    /// allowed. Without --tx/--rx it sends over a veth pair between two
    /// namespaces of its own.
    Gen(Box<gen::Args>),
    /// Request/response, netperf's TCP_RR and UDP_RR: `serve` echoes;
    /// `client` does one transaction at a time (a SIZE-byte request, an
    /// equal response) for --time seconds after a 0.1-s warm-up and prints
    /// one JSON line: transactions, trans/s, mean, p50 and p99 round trip
    /// (µs), UDP requests lost (no response within 200 ms). The lab's RR
    /// tests run it.
    #[command(subcommand)]
    Rr(rr::RrCommand),
    /// Send every frame that arrives on an interface back out of it with
    /// its MAC addresses swapped (testpmd's macswap), until interrupted:
    /// the PVP test's tenant. Prints "ready" once it listens, and on exit
    /// what it reflected and lost.
    Reflect {
        /// IFNAME or IFNAME@NETNS.
        at: String,
        /// ring (a packet socket's rings, in user space) or xdp (in the
        /// kernel).
        #[arg(long, default_value = "ring")]
        reflector: String,
    },
    /// Run one overlay node: open its tenant TAP ports and tunnel ports,
    /// load its flow rules, and switch packets until interrupted.
    ///
    /// Ports: multi-queue TAP tenant ports; Geneve and VXLAN over UDP (IPv4
    /// or IPv6 underlay); GRE and NVGRE over raw IP and STT over raw TCP
    /// (IPv4); QinQ on an underlay interface. Counters are printed on exit.
    ///
    /// OpenFlow: `ovs-ofctl` reaches the node at
    /// punix:/run/tunlab/NAME.mgmt (1.3, and 1.0 with Nicira's extensions);
    /// controllers listed in `[switch] openflow` (tcp:IP[:PORT] to connect,
    /// ptcp:[PORT][:IP] to listen, ssl: and pssl: the same over TLS with
    /// the `[ssl]` table's key and certificates) get PACKET_IN,
    /// FLOW_REMOVED and PORT_STATUS. SIGHUP reads the file again and
    /// applies its ports and rules.
    ///
    /// `[switch] metrics = "127.0.0.1:9476"` serves Prometheus metrics
    /// there. Under systemd (`tunlab-switch@NAME.service`, `Type=notify`)
    /// the switch sends READY=1 once every port is open and the datapath
    /// is loaded or adopted.
    Switch {
        /// The node's configuration (TOML; see crates/switch/src/config.rs).
        #[arg(long)]
        config: PathBuf,
        /// On SIGTERM or SIGINT, leave the kernel datapath (its pinned maps
        /// and programs, its veth ports) forwarding the cached flows, as
        /// ovs-vswitchd leaves the kernel's datapath when it exits: the next
        /// start adopts it, so a restart keeps established connections
        /// (the systemd unit starts the switch so). Without it a stop
        /// removes everything.
        #[arg(long)]
        keep_datapath: bool,
        /// Remove what a kept datapath left (pins, programs, veth ports) for
        /// the node of FILE, which must not be running, and exit.
        #[arg(long, conflicts_with = "keep_datapath")]
        cleanup: bool,
    },
    /// Write the man pages and the bash, zsh and fish completions into DIR
    /// (what `scripts/package` puts in the Debian package).
    #[command(hide = true)]
    Manpages { dir: PathBuf },
    /// Talk to a running switch, like ovs-vsctl / ovs-ofctl: show,
    /// add-port NAME KEY=VALUE..., del-port NAME, dump-flows, add-flow RULE,
    /// add-flows FILE (one rule per line, - for stdin), del-flows [--strict] [MATCH],
    /// mod-flows [--strict] MATCH actions=ACTIONS (MATCH may pick by
    /// cookie=VALUE/MASK), trace FLOW [--ct-next STATES]... (as ovs-appctl
    /// ofproto/trace, recirculations after ct(table=N) included),
    /// stats [--json | --cycles], cycles on|off,
    /// dump-flows --datapath and del-flows --datapath (the datapath's cached
    /// flows, as ovs-dpctl: the kernel's megaflows, or the userspace
    /// datapath's exact-match flows), and flow-restore-wait off (a switch
    /// started with flow_restore_wait = true: the rules are all in).
    Ctl {
        /// The node's control socket (default /run/tunlab/NODE.ctl).
        #[arg(long, conflicts_with = "node")]
        socket: Option<PathBuf>,
        /// The node's name, to find its socket under /run/tunlab.
        #[arg(long)]
        node: Option<String>,
        /// The request, e.g. `dump-flows` or `add-flow "in_port=1 actions=output:10"`.
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        request: Vec<String>,
    },
}

/// A usage error of `tunlab CMD`: said on stderr, exit status 2.
fn usage(cmd: &str, what: &str) -> ExitCode {
    eprintln!("tunlab {cmd}: {what}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode {
            file,
            json,
            decode_as,
        } => match decode::DecodeAs::with(&decode_as) {
            Ok(ports) => run_decode(&file, json, &ports),
            Err(e) => usage("decode", &e.to_string()),
        },
        Command::Switch {
            config,
            keep_datapath,
            cleanup,
        } => switch::run(&config, keep_datapath, cleanup),
        Command::Manpages { dir } => manpages::run(&dir),
        Command::Bench {
            profile,
            variants,
            tests,
            rounds,
            budget,
            seconds,
            baseline,
            seed,
            workers,
            spin_us,
            tenant_cpus,
            out,
            cleanup,
            pvp,
            article,
            quick,
            setup_rate,
            hosts,
            underlay,
            ssh_config,
            ovs_underlay,
            check,
            plan,
        } => {
            let hosts = (!hosts.is_empty()).then_some(bench::HostArgs {
                hosts,
                underlay,
                ssh_config,
                ovs_underlay,
            });
            if let Some(h) = &hosts {
                if check {
                    return bench::check_hosts(h);
                }
                if cleanup {
                    return bench::cleanup_hosts(h);
                }
                if pvp || setup_rate || article.is_some() {
                    eprintln!("tunlab bench --hosts: --pvp, --setup-rate and --article on real hosts are not built yet");
                    return ExitCode::from(2);
                }
            }
            if cleanup {
                let n = tunlab_lab::host::cleanup();
                println!("tunlab bench: removed {n} namespaces left by killed runs");
                return ExitCode::SUCCESS;
            }
            let profile = if quick { "quick".to_string() } else { profile };
            if let Some(names) = article {
                return article::run(
                    &names,
                    &profile,
                    out,
                    article::Rounds {
                        rounds,
                        budget,
                        seed,
                    },
                );
            }
            if pvp {
                return gen::bench_pvp(&profile, out);
            }
            if setup_rate {
                return bench::setup_rate(&profile, &variants, out);
            }
            bench::run(bench::Args {
                profile,
                variants,
                tests,
                rounds,
                budget,
                seconds,
                baseline,
                seed,
                workers,
                spin_us,
                tenant_cpus,
                out,
                hosts,
                plan_only: plan,
            })
        }
        Command::Ctl {
            socket,
            node,
            request,
        } => run_ctl(socket, node, &request.join(" ")),
        Command::Report {
            file,
            baseline,
            out,
        } => bench::report(&file, &baseline, out.as_deref()),
        Command::Compare { a, b } => bench::compare(&a, &b),
        Command::Soak(args) => bench::soak(args),
        Command::Gen(args) => gen::run(*args),
        Command::Reflect { at, reflector } => gen::reflect(&at, &reflector),
        Command::Rr(c) => rr::run(c),
    }
}

pub(crate) fn default_socket(node: &str) -> PathBuf {
    PathBuf::from(format!("/run/tunlab/{node}.ctl"))
}

fn run_ctl(socket: Option<PathBuf>, node: Option<String>, request: &str) -> ExitCode {
    let path = match (socket, node) {
        (Some(p), _) => p,
        (None, Some(n)) => default_socket(&n),
        (None, None) => {
            eprintln!("tunlab ctl: give --node NAME or --socket PATH");
            return ExitCode::from(2);
        }
    };
    let answer = match request.strip_prefix("add-flows ") {
        // As ovs-ofctl add-flows: the rules come from a file (or stdin).
        Some(file) => {
            let file = file.trim();
            let text = if file == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(file)
            };
            match text {
                Ok(t) => tunlab_ctl::request_add_flows(&path, &t)
                    .map(|(ok, text)| (ok, if ok { text } else { format!("{file}: {text}") })),
                Err(e) => {
                    eprintln!("tunlab ctl: add-flows: {file}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        None => tunlab_ctl::request(&path, request),
    };
    match answer {
        Ok((true, text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Ok((false, text)) => {
            eprint!("tunlab ctl: {text}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!(
                "tunlab ctl: {}: {e} (is the switch running?)",
                path.display()
            );
            ExitCode::FAILURE
        }
    }
}

fn run_decode(file: &std::path::Path, json: bool, ports: &decode::DecodeAs) -> ExitCode {
    use std::io::Write;
    let mut frames = Vec::new();
    let mut text = String::new();
    let mut stdout = std::io::stdout().lock();
    let read = capture::for_each_frame(file, |r| {
        let f = decode::decode_record(r, ports);
        if json {
            frames.push(f);
        } else {
            text.clear();
            decode::render_text(&f, &mut text);
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = stdout.write_all(text.as_bytes());
            frames.push(decode::Frame {
                layers: Vec::new(),
                ..f
            });
        }
    });
    if json {
        match serde_json::to_string_pretty(&frames) {
            Ok(s) => {
                let _ = writeln!(stdout, "{s}");
            }
            Err(e) => {
                eprintln!("tunlab decode: cannot write JSON: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let malformed: Vec<usize> = frames
        .iter()
        .filter(|f| f.is_malformed())
        .map(|f| f.number)
        .collect();
    let mut ok = true;
    if let Err(e) = read {
        eprintln!("tunlab decode: {}: {e}", file.display());
        ok = false;
    }
    if !malformed.is_empty() {
        eprintln!(
            "tunlab decode: {}: {} of {} frames malformed (frames {})",
            file.display(),
            malformed.len(),
            frames.len(),
            malformed
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        ok = false;
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
