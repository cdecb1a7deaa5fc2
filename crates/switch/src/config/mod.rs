//! The node's configuration file (`tunlab switch --config node.toml`).
//!
//! ```toml
//! [switch]
//! name = "hv1"
//! underlay_mtu = 1500
//! tlv_map = ["{class=0x0102,type=0x80,len=4}->tun_metadata0"]
//! flows = ["in_port=1 actions=output:10", "in_port=10 actions=output:1"]
//! openflow = ["tcp:192.0.2.9:6653"] # optional: OpenFlow controllers, as
//!                      # OVS's set-controller: tcp:IP[:PORT] (connect) or
//!                      # ptcp:[PORT][:IP] (listen; without IP on 127.0.0.1
//!                      # only: OpenFlow over TCP is unauthenticated), and
//!                      # over TLS ssl:IP[:PORT], pssl:[PORT][:IP] (they
//!                      # need [ssl]); ovs-ofctl always has
//!                      # punix:/run/tunlab/NAME.mgmt
//! spin_us = 50         # optional (default 50, 0: off): after traffic, poll without sleeping
//!                      # this long (a reply is not kept waiting for a wake-up)
//! offloads = true      # optional: TCP super-frames (TAP TSO, UDP GSO/GRO);
//!                      # false: every frame at most one MTU, as before
//! datapath = "ebpf"    # optional: "auto" (default: ebpf when a port is a
//!                      # veth or system port and this kernel runs it, else
//!                      # userspace; said at start), "userspace" or "ebpf"
//!                      # (the kernel datapath: TC programs forward cached
//!                      # flows, this process is the slow path; one worker)
//! flow_cache = 1000000 # optional: the kernel datapath's flow cache entries
//! max_idle_ms = 10000  # optional (default 10000, as OVS's max-idle): a cached
//!                      # flow no CPU used for this long is deleted
//! tunnel_destinations = 65536 # optional: distinct remote endpoints the
//!                      # kernel datapath has outer-header templates for
//! bpf_pin_dir = "/sys/fs/bpf/tunlab" # optional (this default, or "none"): the
//!                      # kernel datapath's maps and links are pinned under
//!                      # DIR/netns-COOKIE/NAME, on the host's bpffs even
//!                      # under `ip netns exec`, so that cached flows forward
//!                      # while the switch is down and a restart adopts them
//! flow_restore_wait = true # optional (default false), OVS's
//!                      # other_config:flow-restore-wait: start without
//!                      # touching the kernel's cached flows (no revalidation,
//!                      # no expiry; packets that miss are dropped, counted)
//!                      # until `tunlab ctl flow-restore-wait off`, so that
//!                      # rules loaded after the start (`ctl add-flows`) are
//!                      # all in before the adopted flows are checked
//! control_group = "tunlab" # optional: this group may use the control socket
//!                      # too (it is then 0660 and group-owned; else 0600, root)
//! metrics = "127.0.0.1:9476" # optional (off by default): serve Prometheus
//!                      # metrics over HTTP at this address (GET /metrics)
//! log_level = "info"   # optional: "error", "warning", "info" (default) or
//!                      # "debug": log lines below it are dropped
//! workers = 2          # optional (default 1, at most 64): packet threads, each
//!                      # pinned to a CPU, flows spread over them by hash
//!
//! [[port]]             # a tenant port: a TAP the switch creates
//! name = "tap-a"
//! ofport = 1
//! type = "tap"
//! netns = "tenant-a"   # optional: move it there...
//! address = "192.168.1.1/24"  # ...and give it this address
//! mtu = 1450           # optional: default underlay_mtu - tunnel overhead
//! queues = 2           # optional: multi-queue TAP (1..16, default 1)
//! ingress_policing_rate = 100000  # optional, tenant ports: kbit/s it may send
//! ingress_policing_burst = 8000   # optional: kbit (default 8000, as OVS)
//!
//! [[port]]             # a tenant port of the kernel datapath: a veth pair,
//! name = "vm-a"        # this end here, its peer (same name) in the tenant's
//! ofport = 2           # namespace with the address, as containers attach
//! type = "veth"
//! netns = "tenant-b"
//! address = "192.168.1.2/24"
//!
//! [[port]]             # a tunnel port
//! name = "gnv0"
//! ofport = 10
//! type = "geneve"      # geneve | vxlan | gre | nvgre | stt | qinq
//! local_ip = "172.16.0.1"    # or "0.0.0.0" / "::": every address of the host,
//!                            # each packet's own becomes its tun_dst
//! remote_ip = "172.16.0.2"   # or "flow": set_field:IP->tun_dst decides
//! key = 6              # VNI/key, or "flow"
//! csum = true
//! ```
//!
//! `ssl:` and `pssl:` controllers need a key and certificates, as OVS's
//! `set-ssl` gives (PEM files; both ends must hold a certificate the CA
//! signed):
//!
//! ```toml
//! [ssl]
//! private_key = "/etc/tunlab/sc-privkey.pem"
//! certificate = "/etc/tunlab/sc-cert.pem"
//! ca_cert = "/etc/tunlab/cacert.pem"
//! ```
//!
//! Errors name the port and the field, and say what is allowed.

mod port;
mod target;

pub use target::{parse_target, Target, OPENFLOW_PORT};

use serde::Deserialize;
use std::net::IpAddr;
use tunlab_dp::{parse_flow, FlowRule, TlvMap};
use tunlab_wire::tunnel::TunnelKind;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: {msg}")]
    Syntax { file: String, msg: String },
    #[error("{file}: port '{port}': {field}: {msg}")]
    Port {
        file: String,
        port: String,
        field: &'static str,
        msg: String,
    },
    #[error("{file}: flows[{index}]: {err}")]
    Flow {
        file: String,
        index: usize,
        err: tunlab_dp::FlowError,
    },
    #[error("{file}: tlv_map: {0}", file = .1)]
    Tlv(tunlab_dp::TlvMapError, String),
    #[error("{file}: openflow[{index}]: {msg}")]
    OpenFlow {
        file: String,
        index: usize,
        msg: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    switch: RawSwitch,
    #[serde(default)]
    port: Vec<RawPort>,
    #[serde(default)]
    ssl: Option<SslFiles>,
}

/// The `[ssl]` table: PEM files for `ssl:` and `pssl:` controllers (read
/// when the switch starts).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SslFiles {
    /// The switch's private key.
    pub private_key: String,
    /// The switch's certificate (and any intermediates after it).
    pub certificate: String,
    /// The CA whose signature a controller's certificate must carry.
    pub ca_cert: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    name: String,
    #[serde(default = "default_mtu")]
    underlay_mtu: u16,
    #[serde(default)]
    tlv_map: Vec<String>,
    #[serde(default)]
    flows: Vec<String>,
    #[serde(default)]
    openflow: Vec<String>,
    #[serde(default)]
    control_socket: Option<String>,
    #[serde(default)]
    control_group: Option<String>,
    #[serde(default = "default_offloads")]
    offloads: bool,
    #[serde(default = "default_spin_us")]
    spin_us: u64,
    #[serde(default)]
    workers: Option<u16>,
    #[serde(default)]
    datapath: Option<String>,
    #[serde(default)]
    flow_cache: Option<u32>,
    #[serde(default)]
    max_idle_ms: Option<u64>,
    #[serde(default)]
    flow_restore_wait: bool,
    #[serde(default)]
    bpf_pin_dir: Option<String>,
    #[serde(default)]
    tunnel_destinations: Option<u32>,
    #[serde(default)]
    metrics: Option<String>,
    #[serde(default)]
    log_level: Option<String>,
}

/// Which datapath moves the node's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatapathChoice {
    /// Every packet through this process (TAPs, sockets).
    Userspace,
    /// TC eBPF programs forward cached flows; this process is the slow path.
    Ebpf,
    /// The default: ebpf when a port is one the kernel delivers to (a
    /// veth or system port) and this kernel runs tunlab's programs;
    /// userspace when no port is (TAP tenants are the slow path's either
    /// way) or the node runs several workers.
    Auto,
}

/// The kernel flow cache's default size (entries): OVS's datapath default
/// flow limit is 200,000; tunlab's aims at 10^6 flows.
pub const DEFAULT_FLOW_CACHE: u32 = 1_000_000;

/// Outer header templates the kernel datapath has room for (about 200
/// bytes of kernel memory each).
pub const DEFAULT_TUNNEL_DESTINATIONS: u32 = 65536;

/// Where kernel datapaths pin their state, each under its node's name.
pub const DEFAULT_BPF_PIN_DIR: &str = "/sys/fs/bpf/tunlab";

/// How long a cached flow may go unused: OVS's default max-idle.
pub const DEFAULT_MAX_IDLE: std::time::Duration = std::time::Duration::from_secs(10);

/// The most packet threads a node may have.
pub const MAX_WORKERS: u16 = 64;

/// 50 µs: a reply within that is handled without a wake-up (request/
/// response 3-4x faster here); the spin yields to anything runnable, so
/// streams lose nothing, but a lightly loaded node spends more CPU
/// (docs/results/sequential-runs.md). 0 turns it off.
fn default_spin_us() -> u64 {
    50
}

fn default_offloads() -> bool {
    true
}

fn default_mtu() -> u16 {
    1500
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPort {
    name: String,
    ofport: u32,
    #[serde(rename = "type")]
    kind: String,
    netns: Option<String>,
    address: Option<String>,
    mtu: Option<u16>,
    queues: Option<u16>,
    local_ip: Option<String>,
    remote_ip: Option<String>,
    key: Option<toml::Value>,
    dst_port: Option<u16>,
    csum: Option<bool>,
    underlay: Option<String>,
    ingress_policing_rate: Option<u32>,
    ingress_policing_burst: Option<u32>,
}

/// The most queues a tenant TAP may have.
pub const MAX_QUEUES: u16 = 16;

/// Fixed or decided per packet by the flow (`set_field`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromFlow<T> {
    Fixed(T),
    Flow,
}

/// A tunnel port's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelPort {
    pub kind: TunnelKind,
    pub local_ip: IpAddr,
    pub remote_ip: FromFlow<IpAddr>,
    pub key: FromFlow<u64>,
    pub dst_port: u16,
    pub csum: bool,
}

/// What kind of port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortKind {
    Tap {
        netns: Option<String>,
        address: Option<String>,
        mtu: Option<u16>,
        /// Queues of a multi-queue TAP (the kernel spreads the tenant's
        /// flows over them by hash).
        queues: u16,
    },
    Tunnel(TunnelPort),
    /// A veth pair for the kernel datapath: one end here, the other (with
    /// the same name) in `netns` with `address`.
    Veth {
        netns: String,
        address: Option<String>,
        mtu: Option<u16>,
    },
    /// An existing network device, by its name, for the kernel datapath
    /// (a VM's TAP held by qemu, a container runtime's veth): the switch
    /// attaches to it and leaves it as it found it.
    System,
    /// 802.1ad over an underlay interface: frames leave with their tags.
    QinQ {
        underlay: String,
    },
}

impl PortKind {
    /// Only the kernel datapath serves this port (veth and system ports).
    pub fn needs_kernel(&self) -> bool {
        matches!(self, PortKind::Veth { .. } | PortKind::System)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub name: String,
    pub ofport: u32,
    pub kind: PortKind,
    /// What a tenant port may send in (OVS's `ingress_policing_rate`).
    pub police: Option<Policing>,
}

/// A tenant port's ingress policer, as OVS's Interface columns give it:
/// kbit/s and a burst in kbit (1 kbit = 1000 bits); frames beyond it are
/// dropped and counted (`policed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policing {
    pub rate_kbps: u32,
    pub burst_kb: u32,
}

/// OVS's burst when none is given: 8000 kbit.
pub const DEFAULT_POLICING_BURST_KB: u32 = 8000;

impl Policing {
    /// Bytes a second and the bucket's size in bytes.
    pub fn bytes(self) -> (u64, u64) {
        (
            u64::from(self.rate_kbps) * 125,
            u64::from(self.burst_kb) * 125,
        )
    }
}

/// A checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub name: String,
    pub underlay_mtu: u16,
    pub ports: Vec<Port>,
    pub tlv: TlvMap,
    pub flows: Vec<FlowRule>,
    pub control_socket: Option<String>,
    /// A group whose members may use the control socket besides root
    /// (the socket is then 0660 and owned by it).
    pub control_group: Option<String>,
    /// OpenFlow controllers to connect to (`tcp:`, `ssl:`) and to listen
    /// for (`ptcp:`, `pssl:`), besides the management socket.
    pub openflow: Vec<Target>,
    /// The key and certificates for `ssl:` and `pssl:` (the `[ssl]` table).
    pub ssl: Option<SslFiles>,
    /// Let tenants hand over TCP super-frames, and keep them whole to
    /// Geneve/VXLAN ports (UDP GSO) and back (software GRO).
    pub offloads: bool,
    /// After traffic, poll without sleeping for this long (µs).
    pub spin_us: u64,
    /// Packet threads: each reads its share of every TAP's queues and of
    /// the underlay sockets.
    pub workers: u16,
    pub datapath: DatapathChoice,
    /// The kernel datapath's flow cache size (entries).
    pub flow_cache: u32,
    /// A cached flow idle this long on every CPU is deleted (OVS's
    /// `other_config:max-idle`).
    pub max_idle: std::time::Duration,
    /// Leave the kernel's cached flows alone until told (OVS's
    /// `flow-restore-wait`).
    pub flow_restore_wait: bool,
    /// Where Prometheus scrapes the node's metrics (`GET /metrics`);
    /// `None`: not served.
    pub metrics: Option<std::net::SocketAddr>,
    /// Log lines below this level are dropped ([`crate::log`]).
    pub log_level: crate::log::Level,
    /// Where the kernel datapath pins its maps and links (a directory of a
    /// bpf filesystem; the node's own under it), so that they outlive a
    /// killed switch; `None`: not pinned.
    pub bpf_pin_dir: Option<String>,
    /// Room in the kernel datapath for this many distinct tunnel
    /// destinations (outer header templates).
    pub tunnel_destinations: u32,
}

/// Port names for flow rules (`in_port=tap-a`, `output:gnv0`).
#[derive(Debug, Clone)]
pub struct PortMap(pub Vec<(String, u32)>);

impl tunlab_dp::PortNames for PortMap {
    fn port_no(&self, name: &str) -> Option<u32> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, no)| *no)
    }
    fn port_name(&self, no: u32) -> Option<String> {
        self.0
            .iter()
            .find(|(_, n)| *n == no)
            .map(|(name, _)| name.clone())
    }
}

impl PortMap {
    /// The names and numbers of these ports.
    pub fn of(ports: &[Port]) -> PortMap {
        PortMap(ports.iter().map(|p| (p.name.clone(), p.ofport)).collect())
    }
}

impl Config {
    pub fn port_map(&self) -> PortMap {
        PortMap::of(&self.ports)
    }
}

/// Parse and check a configuration; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| ConfigError::Syntax {
        file: file.to_string(),
        msg: e.to_string(),
    })?;
    check(raw, file)
}

/// Check a configuration as read.
fn check(mut raw: RawFile, file: &str) -> Result<Config, ConfigError> {
    let mut ports: Vec<Port> = Vec::new();
    for p in &raw.port {
        let port = port::check(p, &ports, file)?;
        ports.push(port);
    }
    let mut tlv = TlvMap::default();
    for t in &raw.switch.tlv_map {
        tlv.add(t)
            .map_err(|e| ConfigError::Tlv(e, file.to_string()))?;
    }
    let mut openflow = Vec::new();
    for (index, t) in raw.switch.openflow.iter().enumerate() {
        openflow.push(parse_target(t).map_err(|msg| ConfigError::OpenFlow {
            file: file.to_string(),
            index,
            msg,
        })?);
    }
    if let Some(index) = openflow.iter().position(Target::is_tls) {
        if raw.ssl.is_none() {
            return Err(ConfigError::OpenFlow {
                file: file.to_string(),
                index,
                msg: format!(
                    "'{}' needs the [ssl] table (private_key, certificate, ca_cert: PEM files)",
                    raw.switch.openflow[index]
                ),
            });
        }
    }
    let flows = std::mem::take(&mut raw.switch.flows);
    let mut cfg = settings(raw.switch, file)?;
    cfg.ssl = raw.ssl.take();
    cfg.ports = ports;
    cfg.tlv = tlv;
    cfg.openflow = openflow;
    let names = cfg.port_map();
    if cfg.datapath == DatapathChoice::Userspace {
        if let Some(p) = cfg.ports.iter().find(|p| p.kind.needs_kernel()) {
            return Err(ConfigError::Syntax {
                file: file.to_string(),
                msg: format!("port '{}': veth and system ports belong to the kernel datapath: set switch.datapath = \"ebpf\" (or \"auto\")", p.name),
            });
        }
    }
    let kernel_ports = cfg.ports.iter().any(|p| p.kind.needs_kernel());
    let on_kernel = match cfg.datapath {
        DatapathChoice::Userspace => false,
        DatapathChoice::Ebpf => true,
        DatapathChoice::Auto => kernel_ports,
    };
    if on_kernel && cfg.workers > 1 {
        return Err(ConfigError::Syntax {
            file: file.to_string(),
            msg: format!(
                "switch.workers = {}: the kernel datapath's slow path runs one worker",
                cfg.workers
            ),
        });
    }
    for (index, f) in flows.iter().enumerate() {
        let rule = parse_flow(f, &names).map_err(|err| ConfigError::Flow {
            file: file.to_string(),
            index,
            err,
        })?;
        cfg.flows.push(rule);
    }
    Ok(cfg)
}

/// The `[switch]` table's settings, each within its bounds (the ports,
/// TLV map, controllers and flows are filled in by the caller).
fn settings(sw: RawSwitch, file: &str) -> Result<Config, ConfigError> {
    Ok(Config {
        name: sw.name,
        openflow: Vec::new(),
        ssl: None,
        underlay_mtu: sw.underlay_mtu,
        ports: Vec::new(),
        tlv: TlvMap::default(),
        flows: Vec::new(),
        control_socket: sw.control_socket,
        control_group: sw.control_group,
        offloads: sw.offloads,
        spin_us: sw.spin_us,
        workers: match sw.workers {
            None => 1,
            Some(w @ 1..=MAX_WORKERS) => w,
            Some(w) => {
                return Err(ConfigError::Syntax {
                    file: file.to_string(),
                    msg: format!("switch.workers: {w} is not between 1 and {MAX_WORKERS}"),
                })
            }
        },
        datapath: match sw.datapath.as_deref() {
            Some("userspace") => DatapathChoice::Userspace,
            Some("ebpf") => DatapathChoice::Ebpf,
            None | Some("auto") => DatapathChoice::Auto,
            Some(other) => {
                return Err(ConfigError::Syntax {
                    file: file.to_string(),
                    msg: format!(
                        "switch.datapath: \"{other}\" is not \"userspace\", \"ebpf\" or \"auto\""
                    ),
                })
            }
        },
        flow_cache: match sw.flow_cache {
            None => DEFAULT_FLOW_CACHE,
            Some(n @ 16..=16_000_000) => n,
            Some(n) => {
                return Err(ConfigError::Syntax {
                    file: file.to_string(),
                    msg: format!("switch.flow_cache: {n} is not between 16 and 16000000"),
                })
            }
        },
        tunnel_destinations: match sw.tunnel_destinations {
            None => DEFAULT_TUNNEL_DESTINATIONS,
            Some(n @ 16..=4_000_000) => n,
            Some(n) => {
                return Err(ConfigError::Syntax {
                    file: file.to_string(),
                    msg: format!("switch.tunnel_destinations: {n} is not between 16 and 4000000"),
                })
            }
        },
        bpf_pin_dir: match sw.bpf_pin_dir.as_deref() {
            None => Some(DEFAULT_BPF_PIN_DIR.to_string()),
            Some("none") => None,
            Some(d) if d.starts_with('/') => Some(d.to_string()),
            Some(d) => {
                return Err(ConfigError::Syntax {
                    file: file.to_string(),
                    msg: format!("switch.bpf_pin_dir: \"{d}\" is not an absolute path or \"none\""),
                })
            }
        },
        flow_restore_wait: sw.flow_restore_wait,
        log_level: match sw.log_level.as_deref().map(crate::log::Level::parse) {
            None => crate::log::Level::Info,
            Some(Ok(l)) => l,
            Some(Err(e)) => {
                return Err(ConfigError::Syntax {
                    file: file.to_string(),
                    msg: format!("switch.log_level: {e}"),
                })
            }
        },
        metrics: match sw.metrics.as_deref().map(str::parse) {
            None => None,
            Some(Ok(a)) => Some(a),
            Some(Err(e)) => {
                return Err(ConfigError::Syntax {
                    file: file.to_string(),
                    msg: format!(
                        "switch.metrics: \"{}\" is not an IP address and port, e.g. \"127.0.0.1:9476\" ({e})",
                        sw.metrics.unwrap_or_default()
                    ),
                })
            }
        },
        max_idle: match sw.max_idle_ms {
            None => DEFAULT_MAX_IDLE,
            Some(ms @ 100..=86_400_000) => std::time::Duration::from_millis(ms),
            Some(ms) => {
                return Err(ConfigError::Syntax {
                    file: file.to_string(),
                    msg: format!(
                        "switch.max_idle_ms: {ms} is not between 100 (0.1 s) and 86400000 (a day)"
                    ),
                })
            }
        },
    })
}

/// One port from `tunlab ctl add-port NAME KEY=VALUE...`, with the keys
/// of a `[[port]]` table (`ofport=3 type=vxlan local_ip=... key=flow`),
/// checked exactly as the configuration file's ports are. Errors name the
/// port and the field.
pub fn parse_port_args(args: &str) -> Result<Port, ConfigError> {
    const WHERE: &str = "add-port";
    let syntax = |msg: String| ConfigError::Syntax {
        file: WHERE.into(),
        msg,
    };
    let mut words = args.split_whitespace();
    let name = words
        .next()
        .ok_or_else(|| syntax("give the port's name, then KEY=VALUE settings".into()))?;
    let mut port = toml::Table::new();
    port.insert("name".into(), toml::Value::String(name.into()));
    for kv in words {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| syntax(format!("'{kv}' is not KEY=VALUE")))?;
        let v = if let Ok(n) = v.parse::<i64>() {
            toml::Value::Integer(n)
        } else if let Ok(b) = v.parse::<bool>() {
            toml::Value::Boolean(b)
        } else {
            toml::Value::String(v.into())
        };
        if port.insert(k.into(), v).is_some() {
            return Err(syntax(format!("'{k}' is given twice")));
        }
    }
    let mut switch = toml::Table::new();
    switch.insert("name".into(), toml::Value::String("ctl".into()));
    // Whether the running switch can serve the port (a veth or system port
    // needs its kernel datapath) is the switch's to say, not the parser's.
    switch.insert("datapath".into(), toml::Value::String("auto".into()));
    let mut doc = toml::Table::new();
    doc.insert("switch".into(), toml::Value::Table(switch));
    doc.insert(
        "port".into(),
        toml::Value::Array(vec![toml::Value::Table(port)]),
    );
    let raw: RawFile = toml::Value::Table(doc)
        .try_into()
        .map_err(|e: toml::de::Error| syntax(e.message().to_string()))?;
    check(raw, WHERE)?
        .ports
        .pop()
        .ok_or_else(|| syntax("no port".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_and_spin_defaults_and_bounds() {
        let cfg = |w: &str| format!("[switch]\nname = \"n\"\n{w}\n");
        assert_eq!(parse(&cfg(""), "n.toml").unwrap().workers, 1);
        assert_eq!(parse(&cfg(""), "n.toml").unwrap().spin_us, 50);
        assert_eq!(parse(&cfg("spin_us = 0"), "n.toml").unwrap().spin_us, 0);
        assert_eq!(parse(&cfg("workers = 2"), "n.toml").unwrap().workers, 2);
        for bad in ["workers = 0", "workers = 65"] {
            let e = parse(&cfg(bad), "n.toml").unwrap_err().to_string();
            assert!(
                e.contains("n.toml: switch.workers:") && e.contains("between 1 and 64"),
                "{e}"
            );
        }
        let e = parse(&cfg("workers = -1"), "n.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("workers"), "{e}");
    }

    #[test]
    fn metrics_are_off_unless_an_address_is_given() -> Result<(), Box<dyn std::error::Error>> {
        let cfg = |m: &str| format!("[switch]\nname = \"n\"\n{m}\n");
        let default = parse(&cfg(""), "n.toml")?;
        assert_eq!(default.metrics, None);
        assert_eq!(default.log_level, crate::log::Level::Info);
        let c = parse(&cfg("metrics = \"127.0.0.1:9476\""), "n.toml")?;
        assert_eq!(c.metrics, Some("127.0.0.1:9476".parse()?));
        let e = parse(&cfg("log_level = \"loud\""), "n.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("n.toml: switch.log_level: \"loud\" is not a log level"),
            "{e}"
        );
        for bad in ["metrics = \"localhost:9476\"", "metrics = \"127.0.0.1\""] {
            let e = parse(&cfg(bad), "n.toml").unwrap_err().to_string();
            assert!(
                e.contains("n.toml: switch.metrics:") && e.contains("e.g. \"127.0.0.1:9476\""),
                "{e}"
            );
        }
        Ok(())
    }

    /// `datapath` defaults to auto; auto takes the kernel only for veth
    /// and system ports, and then holds one worker as ebpf does.
    #[test]
    fn the_datapath_defaults_to_auto() {
        let cfg = |sw: &str, kind: &str| {
            format!("[switch]\nname = \"n\"\n{sw}\n[[port]]\nname = \"p\"\nofport = 1\ntype = \"{kind}\"\n")
        };
        let c = parse(&cfg("", "system"), "n.toml").unwrap();
        assert_eq!(c.datapath, DatapathChoice::Auto);
        // TAP tenants only: several workers are fine (auto is userspace).
        let c = parse(&cfg("workers = 2", "tap"), "n.toml").unwrap();
        assert_eq!((c.datapath, c.workers), (DatapathChoice::Auto, 2));
        for sw in ["workers = 2", "workers = 2\ndatapath = \"auto\""] {
            let e = parse(&cfg(sw, "system"), "n.toml").unwrap_err().to_string();
            assert!(e.contains("slow path runs one worker"), "{sw}: {e}");
        }
        let e = parse(&cfg("datapath = \"kernel\"", "tap"), "n.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"userspace\", \"ebpf\" or \"auto\""), "{e}");
    }

    #[test]
    fn system_ports() {
        let cfg = |dp: &str, extra: &str| {
            format!("[switch]\nname = \"n\"\ndatapath = \"{dp}\"\n[[port]]\nname = \"vm0\"\nofport = 1\ntype = \"system\"\n{extra}")
        };
        let c = parse(&cfg("ebpf", ""), "n.toml").unwrap();
        assert_eq!(c.ports[0].kind, PortKind::System);
        assert!(c.ports[0].kind.needs_kernel());
        let e = parse(&cfg("userspace", ""), "n.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("port 'vm0': veth and system ports belong to the kernel datapath"),
            "{e}"
        );
        for (extra, field) in [
            ("netns = \"x\"", "netns"),
            ("mtu = 1400", "mtu"),
            ("address = \"10.0.0.1/24\"", "address"),
        ] {
            let e = parse(&cfg("ebpf", extra), "n.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("{field}: a system port is an existing device")),
                "{e}"
            );
        }
        // At run time the switch, not the parser, says whether it can serve one.
        assert_eq!(
            parse_port_args("vm1 ofport=2 type=system").unwrap().kind,
            PortKind::System
        );
    }

    #[test]
    fn ingress_policing() {
        let cfg = |kind: &str, extra: &str| {
            format!("[switch]\nname = \"n\"\n[[port]]\nname = \"p\"\nofport = 1\n{kind}\n{extra}")
        };
        let tap = "type = \"tap\"";
        let police = |extra: &str| parse(&cfg(tap, extra), "n.toml").map(|c| c.ports[0].police);
        assert_eq!(police("").unwrap(), None);
        assert_eq!(police("ingress_policing_rate = 0").unwrap(), None);
        let p = police("ingress_policing_rate = 100000").unwrap().unwrap();
        assert_eq!(
            (p.rate_kbps, p.burst_kb),
            (100_000, DEFAULT_POLICING_BURST_KB)
        );
        assert_eq!(p.bytes(), (12_500_000, 1_000_000));
        let p = police("ingress_policing_rate = 1000\ningress_policing_burst = 80")
            .unwrap()
            .unwrap();
        assert_eq!(p.bytes(), (125_000, 10_000));
        let e = police("ingress_policing_burst = 80")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("port 'p'") && e.contains("needs ingress_policing_rate"),
            "{e}"
        );
        let gnv = "type = \"geneve\"\nlocal_ip = \"10.0.0.1\"\nremote_ip = \"10.0.0.2\"";
        let e = parse(&cfg(gnv, "ingress_policing_rate = 1000"), "n.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("only tenant ports"), "{e}");
        let p = parse_port_args("t2 ofport=2 type=tap ingress_policing_rate=5000").unwrap();
        assert_eq!(p.police.map(|p| p.rate_kbps), Some(5000));
    }

    #[test]
    fn add_port_arguments() {
        let p = parse_port_args(
            "vx9 ofport=9 type=vxlan local_ip=10.0.0.1 remote_ip=flow key=flow csum=true",
        )
        .unwrap();
        assert_eq!(p.ofport, 9);
        let PortKind::Tunnel(t) = p.kind else {
            panic!("tunnel")
        };
        assert_eq!(
            (t.kind, t.remote_ip, t.key, t.csum),
            (TunnelKind::Vxlan, FromFlow::Flow, FromFlow::Flow, true)
        );
        let e = parse_port_args(
            "vx9 ofport=9 type=vxlan local_ip=10.0.0.1 remote_ip=10.0.0.2 key=99999999",
        )
        .unwrap_err();
        assert!(e.to_string().contains("port 'vx9': key: 99999999"), "{e}");
        let e = parse_port_args("vx9 ofport=9 type=vxlan bogus=1").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        assert!(parse_port_args("vx9 ofport")
            .unwrap_err()
            .to_string()
            .contains("'ofport' is not KEY=VALUE"));
        assert!(parse_port_args("").is_err());
        let p =
            parse_port_args("tap-x ofport=3 type=tap netns=ns1 address=192.168.1.1/24 mtu=1400")
                .unwrap();
        assert!(matches!(
            p.kind,
            PortKind::Tap {
                mtu: Some(1400),
                ..
            }
        ));
    }

    const GOOD: &str = r#"
[switch]
name = "hv1"
tlv_map = ["{class=0x0102,type=0x80,len=4}->tun_metadata0"]
flows = [
  "in_port=tap-a actions=set_field:172.16.0.2->tun_dst,output:gnv0",
  "in_port=gnv0,tun_id=6 actions=output:tap-a",
]

[[port]]
name = "tap-a"
ofport = 1
type = "tap"
netns = "tenant-a"
address = "192.168.1.1/24"

[[port]]
name = "gnv0"
ofport = 10
type = "geneve"
local_ip = "172.16.0.1"
remote_ip = "flow"
key = 6
csum = true
"#;

    #[test]
    fn good_config() {
        let c = parse(GOOD, "node.toml").unwrap();
        assert_eq!(c.ports.len(), 2);
        assert_eq!(c.flows.len(), 2);
        let PortKind::Tunnel(t) = &c.ports[1].kind else {
            panic!()
        };
        assert_eq!(
            (t.kind, t.remote_ip, t.key, t.dst_port, t.csum),
            (
                TunnelKind::Geneve,
                FromFlow::Flow,
                FromFlow::Fixed(6),
                6081,
                true
            )
        );
    }

    fn err(text: &str) -> String {
        parse(text, "node.toml").unwrap_err().to_string()
    }

    #[test]
    fn errors_name_port_and_field() {
        let e = err(&GOOD.replace("type = \"geneve\"", "type = \"geneva\""));
        assert!(
            e.contains("port 'gnv0': type: 'geneva' is not one of"),
            "{e}"
        );
        let e = err(&GOOD.replace("key = 6", "key = 16777216"));
        assert!(e.contains("port 'gnv0': key:"), "{e}");
        let e = err(&GOOD.replace("ofport = 10", "ofport = 1"));
        assert!(e.contains("clashes with port 'tap-a'"), "{e}");
        let e = err(&GOOD.replace("output:gnv0", "output:gnv1"));
        assert!(
            e.contains("flows[0]") && e.contains("no port named 'gnv1'"),
            "{e}"
        );
        let e = err(&GOOD.replace(
            "local_ip = \"172.16.0.1\"",
            "local_ip = \"fd00::1\"\nremote_ip2 = 1",
        ));
        assert!(e.contains("unknown field `remote_ip2`"), "{e}");
        let e = err("[switch]\nname = ");
        assert!(e.starts_with("node.toml: "), "{e}");
        let e = err(&GOOD.replace("len=4", "len=8"));
        assert!(e.contains("tlv_map"), "{e}");
        let with =
            |of: &str| GOOD.replacen("[switch]\n", &format!("[switch]\nopenflow = [{of}]\n"), 1);
        let e = err(&with("\"tcp:127.0.0.1:6653\", \"udp:1.2.3.4\""));
        assert!(
            e.contains("openflow[1]") && e.contains("'udp:1.2.3.4'"),
            "{e}"
        );
        let e = err(&with("\"tcp:10.0.0.300\""));
        assert!(
            e.contains("openflow[0]") && e.contains("not an IP address"),
            "{e}"
        );
        let e = err(&with("\"ptcp:70000\""));
        assert!(e.contains("port '70000'"), "{e}");
        let tls = parse(
            &(with("\"ssl:10.0.0.1\", \"pssl:\", \"pssl:6634:127.0.0.1\"")
                + "[ssl]\nprivate_key = \"k.pem\"\ncertificate = \"c.pem\"\nca_cert = \"ca.pem\"\n"),
            "node.toml",
        )
        .map_err(|e| e.to_string());
        let tls = tls
            .as_ref()
            .map(|c| (&c.openflow, c.ssl.as_ref().map(|s| s.ca_cert.as_str())));
        assert_eq!(
            tls,
            Ok((
                &vec![
                    Target::Ssl(std::net::SocketAddr::from(([10, 0, 0, 1], 6653))),
                    // Authenticated: every address, as OVS.
                    Target::PSsl(std::net::SocketAddr::from(([0, 0, 0, 0], 6653))),
                    Target::PSsl(std::net::SocketAddr::from(([127, 0, 0, 1], 6634))),
                ],
                Some("ca.pem")
            ))
        );
        let e = err(&with("\"ptcp:\", \"pssl:6653\""));
        assert!(
            e.contains("openflow[1]: 'pssl:6653' needs the [ssl] table"),
            "{e}"
        );
        let cfg = parse(
            &with("\"tcp:10.0.0.1\", \"ptcp:6633:127.0.0.1\", \"tcp:[fd00::1]:16653\", \"ptcp:\", \"ptcp:6653:0.0.0.0\""),
            "node.toml",
        )
        .unwrap();
        assert_eq!(
            cfg.openflow,
            vec![
                Target::Tcp("10.0.0.1:6653".parse().unwrap()),
                Target::PTcp("127.0.0.1:6633".parse().unwrap()),
                Target::Tcp("[fd00::1]:16653".parse().unwrap()),
                // Without an address: the loopback only (unlike OVS).
                Target::PTcp(std::net::SocketAddr::from(([127, 0, 0, 1], 6653))),
                Target::PTcp(std::net::SocketAddr::from(([0, 0, 0, 0], 6653))),
            ]
        );
    }
}
