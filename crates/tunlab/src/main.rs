//! The `tunlab` command line: argument parsing and dispatch only.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tunlab::{capture, decode};

/// tunlab: overlay tunnels (Geneve, VXLAN, GRE/NVGRE, STT, QinQ) in userspace.
///
/// Built so far: the packet-format layer and its decoder. The switch, the
/// lab (`bench`) and the generator (`gen`) are not built yet.
#[derive(Debug, Parser)]
#[command(name = "tunlab", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print every frame of a pcap or pcapng file layer by layer, every field
    /// (outer Ethernet, 802.1Q/802.1ad, IPv4/IPv6, UDP/TCP/GRE, the tunnel
    /// header with its options, then the inner frame), like scapy's show().
    ///
    /// Exits 1 if any frame is malformed or the file is damaged, after
    /// printing everything it could decode.
    Decode {
        /// The capture to read (pcap or pcapng, Ethernet link type).
        file: PathBuf,
        /// Print JSON (one object per frame, in an array) instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode { file, json } => run_decode(&file, json),
    }
}

fn run_decode(file: &std::path::Path, json: bool) -> ExitCode {
    use std::io::Write;
    let mut frames = Vec::new();
    let mut text = String::new();
    let mut stdout = std::io::stdout().lock();
    let read = capture::for_each_frame(file, |n, data, original| {
        let f = decode::decode_frame(n, data, original);
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
