//! Interop with Open vSwitch 3.1's userspace datapath (Debian
//! `openvswitch-switch`, `datapath_type=netdev`):
//!
//! ```text
//!  netns ta          netns hv1                     netns hv2                                netns tb
//!  192.168.7.1 ─tap─ [tunlab switch] ─ 172.31.0.1 ═══ br-phy 172.31.0.2 [ovs-vswitchd]   
//!                                                     br-int: port 10 tunnel, port 1 tbh ─veth─ 192.168.7.2
//! ```
//!
//! ovsdb-server and ovs-vswitchd run inside hv2 with their own database and
//! run directory (never touching a system instance) and are stopped on drop.
//! The OVS side's tenant has `tx off tso off`: OVS's userspace datapath
//! forwards unfinished checksums otherwise.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use tunlab_netio::netns;

/// An Open vSwitch instance inside a namespace.
struct Ovs {
    ns: String,
    dir: PathBuf,
}

impl Ovs {
    fn start(ns: &str, dir: &Path) -> Ovs {
        let dir = dir.join("ovs");
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("conf.db");
        let s = |p: &str| dir.join(p).display().to_string();
        let sh = |args: &[&str]| {
            let out = Command::new("ip")
                .args(["netns", "exec", ns])
                .args(args)
                .env("OVS_RUNDIR", &dir)
                .env("OVS_LOGDIR", &dir)
                .env("OVS_DBDIR", &dir)
                .env("OVS_SYSCONFDIR", &dir)
                .output()
                .expect("run an Open vSwitch tool (is openvswitch-switch installed?)");
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        sh(&[
            "ovsdb-tool",
            "create",
            &db.display().to_string(),
            "/usr/share/openvswitch/vswitch.ovsschema",
        ]);
        let ovs = Ovs {
            ns: ns.to_string(),
            dir: dir.clone(),
        };
        sh(&[
            "ovsdb-server",
            &db.display().to_string(),
            &format!("--remote=punix:{}", s("db.sock")),
            &format!("--pidfile={}", s("ovsdb-server.pid")),
            "--detach",
            &format!("--log-file={}", s("ovsdb-server.log")),
        ]);
        ovs.vsctl(&["--no-wait", "init"]);
        sh(&[
            "ovs-vswitchd",
            &format!("unix:{}", s("db.sock")),
            &format!("--pidfile={}", s("ovs-vswitchd.pid")),
            "--detach",
            &format!("--log-file={}", s("ovs-vswitchd.log")),
        ]);
        ovs
    }

    fn run(&self, tool: &str, args: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, tool])
            .args(args)
            .env("OVS_RUNDIR", &self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{tool} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db=unix:{}", self.dir.join("db.sock").display());
        let mut v = vec![db.as_str()];
        v.extend_from_slice(args);
        self.run("ovs-vsctl", &v)
    }

    fn ofctl(&self, args: &[&str]) -> String {
        self.run("ovs-ofctl", args)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ovs-vswitchd.log")).unwrap_or_default()
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for p in ["ovs-vswitchd.pid", "ovsdb-server.pid"] {
            if let Ok(pid) = std::fs::read_to_string(self.dir.join(p)) {
                if let Ok(pid) = pid.trim().parse::<i32>() {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGTERM,
                    );
                }
            }
        }
        // Give them a moment so that the namespace can go.
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// hv2: OVS with br-phy holding the underlay address and br-int holding a
/// tunnel port (ofport 10) and the tenant's veth (ofport 1).
fn ovs_side(l: &Lab, kind: &str) -> Ovs {
    let ovs = Ovs::start(l.hv2.name(), &l.dir);
    l.hv2.ip(&["addr", "flush", "dev", &l.u2]).unwrap();
    ovs.vsctl(&[
        "add-br",
        "br-phy",
        "--",
        "set",
        "bridge",
        "br-phy",
        "datapath_type=netdev",
        "--",
        "add-port",
        "br-phy",
        &l.u2,
    ]);
    l.hv2
        .ip(&["addr", "add", "172.31.0.2/24", "dev", "br-phy"])
        .unwrap();
    l.hv2.ip(&["link", "set", "br-phy", "up"]).unwrap();
    ovs.vsctl(&[
        "add-br",
        "br-int",
        "--",
        "set",
        "bridge",
        "br-int",
        "datapath_type=netdev",
        "--",
        "add-port",
        "br-int",
        "tun0",
        "--",
        "set",
        "interface",
        "tun0",
        &format!("type={kind}"),
        "options:remote_ip=172.31.0.1",
        "options:key=6",
        "ofport_request=10",
    ]);
    netns::run(&[
        "ip",
        "-n",
        l.hv2.name(),
        "link",
        "add",
        "tbh",
        "type",
        "veth",
        "peer",
        "name",
        "tbe",
        "netns",
        l.tb.name(),
    ])
    .unwrap();
    l.hv2.ip(&["link", "set", "tbh", "up"]).unwrap();
    ovs.vsctl(&[
        "add-port",
        "br-int",
        "tbh",
        "--",
        "set",
        "interface",
        "tbh",
        "ofport_request=1",
    ]);
    l.tb.ip(&["addr", "add", "192.168.7.2/24", "dev", "tbe"])
        .unwrap();
    l.tb.ip(&["link", "set", "tbe", "mtu", "1442", "up"])
        .unwrap();
    netns::run(&[
        "ip",
        "netns",
        "exec",
        l.tb.name(),
        "ethtool",
        "-K",
        "tbe",
        "tx",
        "off",
        "tso",
        "off",
    ])
    .expect("ethtool (install-deps installs it)");
    ovs
}

fn plain(kind: &str) {
    let l = lab();
    let ovs = ovs_side(&l, kind);
    let cfg = node_config(
        "n1",
        l.ta.name(),
        "192.168.7.1",
        kind,
        "172.31.0.1",
        "172.31.0.2",
        6,
        6,
    )
    .replace(
        "address = \"192.168.7.1/24\"",
        "address = \"192.168.7.1/24\"\nmtu = 1442",
    );
    let s1 = Switch::start(l.hv1.name(), &cfg, &l.dir, "n1");
    wait_for_tap(&l.ta, "tap-n1");
    traffic_both_ways(&l, "tunlab/OVS");
    let e = s1.stop();
    assert!(!e.contains("dropped malformed"), "{e}");
    assert!(!ovs.log().contains("ERR"), "{}", ovs.log());
}

#[test]
fn ovs_geneve() {
    plain("geneve");
}

#[test]
fn ovs_vxlan() {
    plain("vxlan");
}

#[test]
fn ovs_gre() {
    plain("gre");
}

/// OVN's option both ways: tunlab sets ingress 3 / egress 2 in
/// tun_metadata0 and OVS matches exactly that; OVS sets ingress 2 /
/// egress 3 and tunlab matches exactly that. Any other value, or no
/// option, matches nothing and nothing passes.
#[test]
fn ovs_geneve_ovn_option() {
    let l = lab();
    let ovs = ovs_side(&l, "geneve");
    ovs.ofctl(&[
        "add-tlv-map",
        "br-int",
        "{class=0x0102,type=0x80,len=4}->tun_metadata0",
    ]);
    ovs.ofctl(&["del-flows", "br-int"]);
    ovs.ofctl(&[
        "add-flow",
        "br-int",
        "in_port=10,tun_metadata0=0x30002 actions=output:1",
    ]);
    ovs.ofctl(&[
        "add-flow",
        "br-int",
        "in_port=1 actions=set_field:0x20003->tun_metadata0,output:10",
    ]);
    let cfg = node_config(
        "n1",
        l.ta.name(),
        "192.168.7.1",
        "geneve",
        "172.31.0.1",
        "172.31.0.2",
        6,
        6,
    )
    .replace(
        "address = \"192.168.7.1/24\"",
        "address = \"192.168.7.1/24\"\nmtu = 1442",
    )
    .replace(
        "[switch]\n",
        "[switch]\ntlv_map = [\"{class=0x0102,type=0x80,len=4}->tun_metadata0\"]\n",
    )
    .replace(
        "\"in_port=1 actions=output:10\"",
        "\"in_port=1 actions=set_field:0x30002->tun_metadata0,output:10\"",
    )
    .replace(
        "\"in_port=10,tun_id=6 actions=output:1\"",
        "\"in_port=10,tun_id=6,tun_metadata0=0x20003 actions=output:1\"",
    );
    let s1 = Switch::start(l.hv1.name(), &cfg, &l.dir, "n1");
    wait_for_tap(&l.ta, "tap-n1");
    traffic_both_ways(&l, "tunlab/OVS");
    let dump = ovs.ofctl(&["dump-flows", "br-int"]);
    assert!(
        dump.contains("tun_metadata0=0x30002") && !dump.contains("n_packets=0,"),
        "{dump}"
    );
    let e = s1.stop();
    assert!(e.contains("port 10 t-n1 (geneve): rx "), "{e}");
}
