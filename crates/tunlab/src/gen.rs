//! `tunlab gen`: read a description (command line or profile file),
//! then show the packets layer by layer, write them to a pcap, or send
//! them ([`crate::gen_send`]).

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tunlab::decode;
use tunlab_gen::{Builder, Sizes};

/// `tunlab gen`'s arguments (documented in `tunlab gen --help`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The packet, e.g. 'Ether()/IP(src=10.0.0.1-10.0.0.9)/UDP()/GENEVE(vni=6,opt=ovn(ingress=3,egress=2))/Ether()/IP()/UDP()'.
    pub packet: Option<String>,
    /// Read the description from a file (# comments, spread over lines).
    #[arg(long, conflicts_with = "packet")]
    pub profile: Option<PathBuf>,
    /// Frame size in bytes including the 4-byte FCS (64 to 9000), or imix
    /// (7:4:1 of 64, 594, 1518); zeros at the `pad` layer make it up.
    /// Several, comma-separated, make one run (one table row) each.
    #[arg(long, value_delimiter = ',')]
    pub size: Vec<String>,
    /// Packets to show or write (default: one per flow; at most 8 shown),
    /// or to send (instead of --duration).
    #[arg(long)]
    pub count: Option<u64>,
    /// Seed of the `random` fields.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the packets layer by layer.
    #[arg(long)]
    pub show: bool,
    /// Write the packets to this pcap file.
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// Send from this interface: IFNAME or IFNAME@NETNS (default: a veth
    /// pair between two namespaces of tunlab's own, a wire with nothing
    /// on it).
    #[arg(long, requires = "rx")]
    pub tx: Option<String>,
    /// Receive and count on this interface: IFNAME or IFNAME@NETNS (may be
    /// the sending one; frames sent from this host are not counted), or
    /// none to send only.
    #[arg(long, requires = "tx")]
    pub rx: Option<String>,
    /// max, frames/s (250kpps, 1.5Mpps) or layer-2 bit/s (800Mbps, 2Gbps).
    #[arg(long, default_value = "max")]
    pub rate: String,
    /// Seconds to send (unless --count).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Sending threads, each with its own TX ring and its share of the flows.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Search for the highest rate with zero loss (RFC 2544 binary search).
    #[arg(long, conflicts_with = "pdr")]
    pub ndr: bool,
    /// Search for the highest rate with at most this % loss (e.g. 0.1).
    #[arg(long)]
    pub pdr: Option<f64>,
    /// Seconds per search trial.
    #[arg(long, default_value_t = 30.0)]
    pub trial: f64,
    /// Seconds of the final validation trial.
    #[arg(long, default_value_t = 30.0)]
    pub validation: f64,
    /// The search stops when failing and passing rates are within this %.
    #[arg(long, default_value_t = 5.0)]
    pub granularity: f64,
    /// Write the results (every trial, per-flow counts) to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The TRex article's PVP test with tunlab's switch as the compute node:
    /// send Geneve with OVN's option at the switch, which decapsulates to a
    /// tenant that sends every frame back (macswap); count what returns.
    /// Without a description, the article's packet addressed to the node.
    #[arg(long, conflicts_with_all = ["tx", "rx"])]
    pub pvp: bool,
}

pub(crate) fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("tunlab gen: {msg}");
    ExitCode::from(2)
}

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

pub fn run(a: Args) -> ExitCode {
    let text = match (&a.packet, &a.profile) {
        (Some(p), None) => p.clone(),
        (None, Some(f)) => match std::fs::read_to_string(f) {
            Ok(t) => tunlab_gen::read_profile(&t),
            Err(e) => return fail(format!("{}: {e}", f.display())),
        },
        (None, None) if a.pvp => tunlab_lab::pvp::DESCRIPTION.to_string(),
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
        return crate::gen_send::run(&a, &text, &builders);
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
/// lengths, through the same path as `tunlab gen --pvp --ndr`.
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
    let json = out.join("pvp.json");
    let argv = [
        "gen",
        "--pvp",
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
    match Wrap::try_parse_from(argv) {
        Ok(w) => run(w.args),
        Err(e) => fail(e),
    }
}
