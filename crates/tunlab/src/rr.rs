//! `tunlab rr`: request/response between two hosts (the engine is the
//! lab's, [`tunlab_lab::rr`]); the lab's RR tests run it in the tenants.

use clap::Subcommand;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub(crate) enum RrCommand {
    /// Echo requests on IP:PORT until killed.
    Serve {
        #[arg(long, value_enum, default_value = "tcp")]
        proto: RrProto,
        /// The address to listen on.
        #[arg(long)]
        bind: std::net::IpAddr,
        #[arg(long)]
        port: u16,
    },
    /// Transactions against a server for --time seconds.
    Client {
        #[arg(long, value_enum, default_value = "tcp")]
        proto: RrProto,
        /// The server's address.
        server: std::net::IpAddr,
        #[arg(long)]
        port: u16,
        /// Seconds measured (after the warm-up).
        #[arg(long, default_value = "10", allow_negative_numbers = true)]
        time: f64,
        /// Bytes of each request and of each response (UDP: 8 or more).
        #[arg(long, default_value = "1")]
        size: usize,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum RrProto {
    Tcp,
    Udp,
}

pub(crate) fn run(c: RrCommand) -> ExitCode {
    use tunlab_lab::rr::{self, Proto};
    let p = |p: RrProto| match p {
        RrProto::Tcp => Proto::Tcp,
        RrProto::Udp => Proto::Udp,
    };
    let result = match c {
        RrCommand::Serve { proto, bind, port } => rr::serve(p(proto), (bind, port).into()),
        RrCommand::Client {
            proto,
            server,
            port,
            time,
            size,
        } => {
            if !(time.is_finite() && time > 0.0) {
                let what = format!("--time {time}: must be a positive number of seconds");
                return crate::usage("rr client", &what);
            }
            rr::client(p(proto), (server, port).into(), size, time).map(|r| {
                println!("{}", serde_json::to_string(&r).unwrap_or_default());
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tunlab rr: {e}");
            ExitCode::FAILURE
        }
    }
}
