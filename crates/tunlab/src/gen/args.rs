//! `tunlab gen`'s command line, shared by what it shows, writes and sends.

use std::path::PathBuf;
use std::process::ExitCode;

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
    /// How frames leave: packet (AF_PACKET TX ring), xdp (AF_XDP, a UMEM
    /// per thread on queue THREAD; zero-copy where the driver offers it,
    /// copy mode otherwise: the mode is printed) or auto (xdp if the
    /// interface takes it, else packet, saying why).
    #[arg(long, default_value = "packet")]
    pub io: String,
    /// Where --io xdp counts in the kernel: xdp or tc (ingress). Default:
    /// XDP on a NIC, TC on a virtual device such as veth, whose XDP
    /// copies every frame a socket sent (too little headroom).
    #[arg(long, value_parser = ["xdp", "tc"])]
    pub count_hook: Option<String>,
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
    /// The PVP node's datapath: userspace (the tenant on a TAP) or ebpf
    /// (the kernel's TC programs forward cached flows, the tenant on a veth).
    #[arg(long, default_value = "userspace", requires = "pvp")]
    pub node: String,
    /// The PVP tunnel between generator and node: geneve (the article's,
    /// with OVN's option) or vxlan (which this kernel also has, so that
    /// --sockperf can cross the same node).
    #[arg(long, default_value = "geneve", requires = "pvp")]
    pub tunnel: String,
    /// The PVP tenant's reflector: ring (a packet socket in user space,
    /// as the article's testpmd) or xdp (swapped and sent back in the
    /// kernel; the tenant then costs the shared CPUs least).
    #[arg(long, default_value = "ring", requires = "pvp")]
    pub reflector: String,
    /// After each size's run, sockperf's UDP ping-pong through the same
    /// node at the same --rate and --duration, its round trips beside the
    /// generator's (needs --tunnel vxlan and a fixed --rate, e.g. 10kpps).
    #[arg(long, requires = "pvp", conflicts_with_all = ["ndr", "pdr"])]
    pub sockperf: bool,
    /// With --pvp: the node is a real host, as `ssh` takes it (USER@HOST;
    /// your keys, agent and ssh config apply). The tenant and the switch
    /// run there (tunlab is copied over unless it has this version); the
    /// generator sends here, from the interface that holds the first
    /// --underlay address.
    #[arg(long, requires_all = ["pvp", "underlay"], conflicts_with = "sockperf")]
    pub hosts: Option<String>,
    /// With --hosts: GEN_IP,NODE_IP, the generator's address here and the
    /// node's there (each checked to be on an interface).
    #[arg(long, value_delimiter = ',', requires = "hosts")]
    pub underlay: Vec<String>,
    /// A config file for ssh (`ssh -F FILE`).
    #[arg(long, requires = "hosts")]
    pub ssh_config: Option<PathBuf>,
}

pub fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("tunlab gen: {msg}");
    ExitCode::from(2)
}
