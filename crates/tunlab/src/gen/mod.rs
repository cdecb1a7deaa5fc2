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
        return send::run(&a, &text, &builders);
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
