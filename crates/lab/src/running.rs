//! Each datapath set up on a topology and torn down with it: the kernel
//! bridging the tenant onto the underlay (no tunnel), the kernel's VXLAN
//! device, Open vSwitch's userspace datapath (one instance per host
//! namespace) and tunlab's switch, per encapsulation; what runs for it.

use crate::host::{Daemon, Host};
use crate::ovs::Ovs;
use crate::topology::{wait_for_ctl, Ctl, Topology};
use crate::variant::{Variant, TENANT, UNDER, UNDERLAY_MTU};
use crate::LabError;
use std::path::Path;
use std::time::{Duration, Instant};

/// A variant set up on a topology: the daemons to stop and the processes
/// whose CPU is the datapath's.
#[derive(Debug)]
pub struct Running {
    pub variant: Variant,
    daemons: Vec<Daemon>,
    /// Open vSwitch instances (stopped on drop, before the namespaces go).
    ovs: Vec<Ovs>,
    /// Namespaces made for the variant on real hosts (Open vSwitch's),
    /// removed after it.
    hosts: Vec<Host>,
    /// The datapath processes, each with the index of the host it runs on.
    pub pids: Vec<u32>,
    pid_host: Vec<usize>,
    /// The real hosts, when the run is on them (the pids are theirs).
    remote: Option<[crate::remote::Ssh; 2]>,
    /// tunlab's nodes' control sockets.
    ctls: Vec<Ctl>,
    /// Real hosts' CPU probes.
    probes: Vec<std::sync::Mutex<crate::remote::CpuProbe>>,
    pub tenant_if: String,
    pub notes: Vec<String>,
}

impl Running {
    fn new(v: Variant, remote: Option<[crate::remote::Ssh; 2]>) -> Running {
        Running {
            variant: v,
            daemons: Vec::new(),
            ovs: Vec::new(),
            hosts: Vec::new(),
            pids: Vec::new(),
            pid_host: Vec::new(),
            remote,
            ctls: Vec::new(),
            probes: Vec::new(),
            tenant_if: "eth0".into(),
            notes: Vec::new(),
        }
    }

    /// What measures the datapath's CPU: this machine's `/proc`, or each
    /// real host's over SSH.
    pub fn meter(&self) -> crate::meter::Meter<'_> {
        match &self.remote {
            None => crate::meter::Meter::Local(&self.pids),
            Some(_) => crate::meter::Meter::Remote(&self.probes),
        }
    }

    /// On real hosts: a standing CPU probe per host, for the datapath
    /// processes running there.
    fn start_probes(&mut self) -> Result<(), LabError> {
        let Some(ssh) = &self.remote else {
            return Ok(());
        };
        for (i, s) in ssh.iter().enumerate() {
            let pids: Vec<u32> = self
                .pids
                .iter()
                .zip(&self.pid_host)
                .filter(|(_, h)| **h == i)
                .map(|(p, _)| *p)
                .collect();
            let probe = crate::remote::CpuProbe::start(s, &pids)?;
            self.probes.push(std::sync::Mutex::new(probe));
        }
        Ok(())
    }

    /// Empty the flow caches of the variant's datapaths (before a
    /// first-packet probe): tunlab's eBPF nodes `del-flows --datapath`,
    /// Open vSwitch `dpctl/del-flows`. The others keep no per-flow cache
    /// (tunlab's userspace path classifies every packet; its exact-match
    /// cache only remembers which rule a key found) and do nothing.
    pub fn flush(&self) -> Result<(), String> {
        if self.variant.is_ebpf() {
            for ctl in &self.ctls {
                match ctl.request("del-flows --datapath")? {
                    (true, _) => {}
                    (false, why) => {
                        return Err(format!("{}: del-flows --datapath: {why}", ctl.path))
                    }
                }
            }
        }
        for o in &self.ovs {
            o.run("ovs-appctl", &["dpctl/del-flows"])
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Replace both nodes' flow rules with `rules` (ovs-ofctl syntax):
    /// tunlab's through its control socket, Open vSwitch's on br-int.
    pub fn set_rules(&self, rules: &[&str]) -> Result<(), String> {
        for ctl in &self.ctls {
            for req in std::iter::once("del-flows".to_string())
                .chain(rules.iter().map(|r| format!("add-flow {r}")))
            {
                match ctl.request(&req)? {
                    (true, _) => {}
                    (false, why) => return Err(format!("{}: {req}: {}", ctl.path, why.trim())),
                }
            }
        }
        for o in &self.ovs {
            o.ofctl(&["del-flows", "br-int"])
                .map_err(|e| e.to_string())?;
            for r in rules {
                o.ofctl(&["add-flow", "br-int", r])
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// If a daemon (a tunlab node) has exited: which, how, and the last
    /// lines it wrote to stderr.
    fn exited(&mut self) -> Option<String> {
        use std::io::Read;
        let mut out = Vec::new();
        for (i, d) in self.daemons.iter_mut().enumerate() {
            let Ok(Some(status)) = d.child.try_wait() else {
                continue;
            };
            let mut err = String::new();
            if let Some(mut e) = d.child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let lines: Vec<&str> = err.lines().collect();
            let tail = &lines[lines.len().saturating_sub(5)..];
            out.push(format!(
                "the switch on h{} exited ({status}): {}",
                i + 1,
                tail.join(" / ")
            ));
        }
        (!out.is_empty()).then(|| out.join("; "))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            d.stop();
        }
    }
}

/// Set `v` up on `topo`; `tunlab` is the binary to run the switch with and
/// `dir` a folder for its configuration files.
pub fn setup(
    v: Variant,
    topo: &Topology,
    tunlab: &Path,
    dir: &Path,
    workers: Option<u16>,
    spin_us: Option<u64>,
) -> Result<Running, LabError> {
    let mut r = Running::new(v, topo.remote.as_ref().map(|r| r.ssh.clone()));
    let remote = topo.remote.is_some();
    match v {
        Variant::None if remote => {
            // On a real host the underlay NIC carries the SSH session too,
            // so it is not enslaved to a bridge: the tenant gets a macvlan
            // of it (no tunnel, the tenant's frames on the wire as they
            // are).
            for (i, t) in topo.t.iter().enumerate() {
                macvlan_into(topo, i, t, "eth0", v.tenant_mtu())?;
                t.ip(&["addr", "add", &format!("{}/24", TENANT[i]), "dev", "eth0"])?;
            }
            r.notes
                .push("on real hosts the tenant sits on a macvlan of the underlay NIC".into());
        }
        Variant::None | Variant::KernelVxlan | Variant::KernelVxlanSw => {
            setup_kernel(v, topo, &mut r)?
        }
        v if v.is_ovs() => setup_ovs_pair(v, topo, dir, &mut r)?,
        _ => setup_tunlab(v, topo, tunlab, dir, (workers, spin_us), &mut r)?,
    }
    if let Err(e) = check_mtu(v, topo) {
        return Err(match r.exited() {
            Some(why) => LabError::Setup(format!("{e}; {why}")),
            None => e,
        });
    }
    if !crate::remote::planning() {
        r.start_probes()?;
    }
    Ok(r)
}

/// No tunnel (the tenant bridged onto the underlay) or the kernel's
/// VXLAN device, on each host.
fn setup_kernel(v: Variant, topo: &Topology, r: &mut Running) -> Result<(), LabError> {
    let (remote, nm) = (topo.remote.is_some(), &topo.names);
    for (i, h) in topo.h.iter().enumerate() {
        tenant_veth(v, h, &topo.t[i], &nm.ten, i)?;
        h.ip(&["link", "add", &nm.bridge, "type", "bridge"])?;
        if v == Variant::None {
            h.ip(&["link", "set", &topo.under[i], "master", &nm.bridge])?;
        } else {
            if !remote {
                h.ip(&["addr", "add", &format!("{}/24", UNDER[i]), "dev", "under"])?;
            }
            h.ip(&[
                "link",
                "add",
                &nm.vxlan,
                "type",
                "vxlan",
                "id",
                "42",
                "local",
                &topo.under_ip[i],
                "remote",
                &topo.under_ip[1 - i],
                "dstport",
                "4789",
                "dev",
                &topo.under[i],
            ])?;
            h.ip(&["link", "set", &nm.vxlan, "master", &nm.bridge, "up"])?;
        }
        h.ip(&["link", "set", &nm.ten, "master", &nm.bridge, "up"])?;
        h.ip(&["link", "set", &nm.bridge, "up"])?;
    }
    if v != Variant::None {
        r.notes
            .push("kernel VXLAN sends an outer UDP checksum by default on this kernel".into());
    }
    if v == Variant::KernelVxlanSw {
        // The veth underlay passes a tunnelled TSO frame to its peer
        // whole, as a NIC with tunnel segmentation offload takes it;
        // with the feature off the kernel segments it first, in software.
        for (i, h) in topo.h.iter().enumerate() {
            h.run(&[
                "ethtool",
                "-K",
                &topo.under[i],
                "tx-udp_tnl-segmentation",
                "off",
                "tx-udp_tnl-csum-segmentation",
                "off",
            ])?;
        }
        r.notes.push(
            "underlay: tx-udp_tnl-segmentation and tx-udp_tnl-csum-segmentation off (the kernel segments tunnelled TSO frames in software)".into(),
        );
    }
    Ok(())
}

/// Open vSwitch's userspace datapath on each host (in a namespace of its
/// own on real hosts, on a macvlan of the NIC).
fn setup_ovs_pair(
    v: Variant,
    topo: &Topology,
    dir: &Path,
    r: &mut Running,
) -> Result<(), LabError> {
    for i in 0..2 {
        let folder = format!("{}-h{}", v.name(), i + 1);
        let ovs = match &topo.remote {
            None => {
                let ovs = Ovs::start(topo.h[i].name(), &dir.join(folder))?;
                setup_ovs(v, &ovs, &topo.h[i], &topo.t[i], i, UNDER, 24, false)?;
                ovs
            }
            Some(rm) => {
                // A namespace of its own on the host, its
                // underlay a macvlan of the NIC with an address of
                // its own: the host's NIC and address stay as
                // they are.
                let ips = rm.ovs_underlay.as_ref().ok_or_else(|| {
                    LabError::Setup("Open vSwitch on real hosts needs --ovs-underlay".into())
                })?;
                let o = Host::remote_ns(&rm.ssh[i], &format!("{}-ovs", topo.t[i].name()), "ovs")?;
                macvlan_into(topo, i, &o, "under", UNDERLAY_MTU)?;
                let ovs = Ovs::start_remote(
                    &rm.ssh[i],
                    o.name(),
                    &format!("{}/{folder}/ovs", rm.workdir),
                )?;
                let ips = [ips[0].as_str(), ips[1].as_str()];
                // OVS routes its tunnels by the connected route of
                // br-phy's address: the shortest prefix that holds
                // both endpoints (OVS 3.1 skipped a host route to
                // the peer added beside a /32).
                let plen = common_prefix(ips);
                let done = setup_ovs(v, &ovs, &o, &topo.t[i], i, ips, plen, true);
                r.hosts.push(o);
                done.map(|_| ovs)?
            }
        };
        if let Some(p) = ovs.vswitchd_pid() {
            r.pids.push(p);
            r.pid_host.push(i);
        }
        r.ovs.push(ovs);
    }
    r.notes.push(
        "Open vSwitch netdev: tenant tx checksum and TSO offload off (its userspace datapath forwards unfinished checksums otherwise); no outer UDP checksum".into(),
    );
    Ok(())
}

/// tunlab's switch on each host, from a configuration written for the
/// variant; returns once both serve their control sockets.
fn setup_tunlab(
    v: Variant,
    topo: &Topology,
    tunlab: &Path,
    dir: &Path,
    (workers, spin_us): (Option<u16>, Option<u64>),
    r: &mut Running,
) -> Result<(), LabError> {
    let (remote, nm) = (topo.remote.is_some(), &topo.names);
    let kind = v
        .tunlab_kind()
        .ok_or_else(|| LabError::Setup(format!("{}: no tunlab kind", v.name())))?;
    for (i, h) in topo.h.iter().enumerate() {
        let cfg = tunlab_config(v, kind, topo, i, workers, spin_us);
        let file = format!("{}-n{}.toml", v.name(), i + 1);
        let (path, exe) = match &topo.remote {
            Some(rm) => (format!("{}/{file}", rm.workdir), rm.tunlab[i].clone()),
            None => (
                dir.join(file).display().to_string(),
                tunlab.display().to_string(),
            ),
        };
        h.write_file(&path, cfg.as_bytes(), false)?;
        if kind != "qinq" && !remote {
            h.ip(&["addr", "add", &format!("{}/24", UNDER[i]), "dev", "under"])?;
        }
        let d = h.spawn_daemon(&[&exe, "switch", "--config", &path])?;
        // Under `ip netns exec` the switch's pid is the child's
        // after exec, the one whose CPU counts.
        r.pids.push(d.pid);
        r.pid_host.push(i);
        r.daemons.push(d);
        r.ctls.push(topo.ctl(i));
    }
    r.tenant_if = nm.port.clone();
    // A switch serves its control socket once every port is open
    // (the TAP moved, addressed and up; tunnel sockets bound).
    for ctl in r.ctls.clone() {
        wait_for_ctl(&ctl, Duration::from_secs(20), || r.exited())?;
    }
    if v == Variant::TunlabEbpfGeneveScraped {
        for h in &topo.h {
            // One scrape must work before the loop is trusted to.
            let once = scrape_once();
            let page = h.run(&["bash", "-c", &once])?;
            if !page.contains("tunlab_port_receive_packets_total") {
                return Err(LabError::Setup(format!(
                    "{}: 127.0.0.1:{METRICS_PORT} did not serve the metrics: {}",
                    v.name(),
                    page.lines().next().unwrap_or("nothing")
                )));
            }
            r.daemons.push(h.spawn_daemon(&[
                "bash",
                "-c",
                &format!("while :; do {{ {once}; }} >/dev/null 2>&1; sleep 1; done"),
            ])?);
        }
    }
    Ok(())
}

/// The port on 127.0.0.1 where the scraped variant serves its metrics
/// (on each host).
const METRICS_PORT: u16 = 9476;

/// One Prometheus-like scrape with bash alone (`/dev/tcp`): GET
/// /metrics, the whole answer read.
fn scrape_once() -> String {
    format!(
        "exec 3<>/dev/tcp/127.0.0.1/{METRICS_PORT} && printf 'GET /metrics HTTP/1.1\\r\\nHost: lab\\r\\nConnection: close\\r\\n\\r\\n' >&3 && cat <&3; exec 3<&-"
    )
}

/// A macvlan of host `i`'s underlay NIC (bridge mode), moved into the
/// namespace `into` as `name`, with `mtu`, up.
fn macvlan_into(
    topo: &Topology,
    i: usize,
    into: &Host,
    name: &str,
    mtu: u16,
) -> Result<(), LabError> {
    let (h, mv) = (&topo.h[i], &topo.names.macvlan);
    h.ip(&[
        "link",
        "add",
        mv,
        "link",
        &topo.under[i],
        "type",
        "macvlan",
        "mode",
        "bridge",
    ])?;
    h.ip(&["link", "set", mv, "netns", into.name()])?;
    into.ip(&["link", "set", mv, "name", name])?;
    into.ip(&["link", "set", name, "mtu", &mtu.to_string(), "up"])?;
    Ok(())
}

/// The tenant's veth: `ten` on host `h`, `eth0` in its tenant `t` with
/// tenant `i`'s address and the variant's MTU (the host end is attached
/// by the variant).
fn tenant_veth(v: Variant, h: &Host, t: &Host, ten: &str, i: usize) -> Result<(), LabError> {
    h.ip(&[
        "link",
        "add",
        ten,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        t.name(),
    ])?;
    t.ip(&["addr", "add", &format!("{}/24", TENANT[i]), "dev", "eth0"])?;
    t.ip(&[
        "link",
        "set",
        "eth0",
        "mtu",
        &v.tenant_mtu().to_string(),
        "up",
    ])?;
    Ok(())
}

/// Host `i` of an Open vSwitch variant: `ovs` runs in `h`'s namespace,
/// the tenant's veth on `br-int` (ofport 2); the uplink (ofport 1) is the
/// underlay device `under` itself (bridge, QinQ) or a tunnel port whose
/// underlay address (`ips[i]`, to `ips[1 - i]`, `plen` bits of prefix)
/// lives on `br-phy`, as OVS's userspace tunnels need. With `macvlan`
/// the underlay device is a macvlan of a real NIC.
#[allow(clippy::too_many_arguments)]
fn setup_ovs(
    v: Variant,
    ovs: &Ovs,
    h: &Host,
    t: &Host,
    i: usize,
    ips: [&str; 2],
    plen: u8,
    macvlan: bool,
) -> Result<(), LabError> {
    tenant_veth(v, h, t, "ten", i)?;
    h.ip(&["link", "set", "ten", "up"])?;
    t.run(&["ethtool", "-K", "eth0", "tx", "off", "tso", "off"])?;
    let netdev = ["--", "set", "bridge", "br-int", "datapath_type=netdev"];
    let mut br = vec!["add-br", "br-int"];
    br.extend_from_slice(&netdev);
    ovs.vsctl(&br)?;
    let uplink: Vec<String> = match v {
        Variant::OvsBridge | Variant::OvsQinq => vec!["under".into()],
        _ => {
            let kind = match v {
                Variant::OvsVxlan => "vxlan",
                Variant::OvsGre => "gre",
                _ => "geneve",
            };
            let mut br = vec![
                "add-br",
                "br-phy",
                "--",
                "set",
                "bridge",
                "br-phy",
                "datapath_type=netdev",
            ];
            // Under a macvlan (real hosts) only frames to the macvlan's
            // own MAC come up from the NIC: br-phy, which answers for the
            // tunnel address, takes that MAC.
            let hwaddr;
            if macvlan {
                let mac = h.run(&["cat", "/sys/class/net/under/address"])?;
                hwaddr = format!("other-config:hwaddr=\"{}\"", mac.trim());
                br.push(&hwaddr);
            }
            br.extend(["--", "add-port", "br-phy", "under"]);
            ovs.vsctl(&br)?;
            h.ip(&[
                "addr",
                "add",
                &format!("{}/{plen}", ips[i]),
                "dev",
                "br-phy",
            ])?;
            h.ip(&["link", "set", "br-phy", "up"])?;
            if plen == 32 {
                h.ip(&[
                    "route",
                    "add",
                    &format!("{}/32", ips[1 - i]),
                    "dev",
                    "br-phy",
                ])?;
            }
            vec![
                "tun0".into(),
                "--".into(),
                "set".into(),
                "interface".into(),
                "tun0".into(),
                format!("type={kind}"),
                format!("options:remote_ip={}", ips[1 - i]),
                "options:key=42".into(),
            ]
        }
    };
    let mut add = vec!["add-port", "br-int"];
    add.extend(uplink.iter().map(String::as_str));
    add.extend(["--", "set", "interface", &uplink[0], "ofport_request=1"]);
    ovs.vsctl(&add)?;
    ovs.vsctl(&[
        "add-port",
        "br-int",
        "ten",
        "--",
        "set",
        "interface",
        "ten",
        "ofport_request=2",
    ])?;
    let flows: &[&str] = match v {
        // The QinQ article's flows; push_vlan needs OpenFlow 1.3.
        Variant::OvsQinq => &[
            "in_port=1,dl_vlan=1 action=pop_vlan,output:2",
            "in_port=2 action=push_vlan:0x88a8,mod_vlan_vid:1,output:1",
        ],
        Variant::OvsGeneveOvn => {
            ovs.ofctl(&[
                "add-tlv-map",
                "br-int",
                "{class=0x0102,type=0x80,len=4}->tun_metadata0",
            ])?;
            &[
                "in_port=2 actions=set_field:0x30002->tun_metadata0,output:1",
                "in_port=1,tun_metadata0=0x30002 actions=output:2",
            ]
        }
        // The rest keep the bridge's default NORMAL flow.
        _ => &[],
    };
    if !flows.is_empty() {
        ovs.ofctl(&["-O", "OpenFlow13", "del-flows", "br-int"])?;
        for f in flows {
            ovs.ofctl(&["-O", "OpenFlow13", "add-flow", "br-int", f])?;
        }
    }
    Ok(())
}

/// The longest prefix two addresses share, in bits (0 if they are of
/// different families or do not parse).
fn common_prefix(ips: [&str; 2]) -> u8 {
    use std::net::IpAddr;
    let bits = |s: &str| -> Option<(u128, u32)> {
        match s.parse::<IpAddr>().ok()? {
            IpAddr::V4(a) => Some(((u32::from(a) as u128) << 96, 32)),
            IpAddr::V6(a) => Some((u128::from(a), 128)),
        }
    };
    match (bits(ips[0]), bits(ips[1])) {
        (Some((a, la)), Some((b, lb))) if la == lb => ((a ^ b).leading_zeros().min(la)) as u8,
        _ => 0,
    }
}

/// One node's configuration for a tunlab variant.
fn tunlab_config(
    v: Variant,
    kind: &str,
    topo: &Topology,
    i: usize,
    workers: Option<u16>,
    spin_us: Option<u64>,
) -> String {
    let tenant_ns = topo.t[i].name();
    let name = format!("bench{}", i + 1);
    let (flows, tlv) = match v {
        Variant::TunlabQinq | Variant::TunlabEbpfQinq => (
            // The QinQ article's flows: S-VLAN 1 on the underlay.
            r#""in_port=1,dl_vlan=1 action=pop_vlan,output:2", "in_port=2 action=push_vlan:0x88a8,mod_vlan_vid:1,output:1""#.to_string(),
            String::new(),
        ),
        Variant::TunlabGeneveOvn | Variant::TunlabEbpfGeneveOvn => (
            // OVN's option: ingress logical port 3, egress 2, matched on receive.
            r#""in_port=2 actions=set_field:0x30002->tun_metadata0,output:1", "in_port=1,tun_metadata0=0x30002 actions=output:2""#.to_string(),
            r#"tlv_map = ["{class=0x0102,type=0x80,len=4}->tun_metadata0"]"#.to_string(),
        ),
        _ => (r#""in_port=2 actions=output:1", "in_port=1 actions=output:2""#.to_string(), String::new()),
    };
    let uplink = if kind == "qinq" {
        format!("type = \"qinq\"\nunderlay = \"{}\"", topo.under[i])
    } else {
        format!(
            "type = \"{kind}\"\nlocal_ip = \"{}\"\nremote_ip = \"{}\"\nkey = 42{}",
            topo.under_ip[i],
            topo.under_ip[1 - i],
            // The outer UDP checksum on: Linux sends UDP GSO only with it,
            // and over the veth it stays partial, so it costs nothing.
            if matches!(kind, "geneve" | "vxlan") {
                "\ncsum = true"
            } else {
                ""
            }
        )
    };
    // The kernel datapath: tenants on veth ports (named as the TAP is, so
    // that the tenant's side of every tunlab variant looks the same).
    let (datapath, port_type) = match v {
        Variant::TunlabEbpfGeneveScraped => (
            format!("datapath = \"ebpf\"\nmetrics = \"127.0.0.1:{METRICS_PORT}\"\n"),
            "veth",
        ),
        v if v.is_ebpf() => ("datapath = \"ebpf\"\n".to_string(), "veth"),
        _ => (String::new(), "tap"),
    };
    format!(
        "[switch]\nname = \"{name}\"\n{datapath}control_socket = \"{ctl}\"\nunderlay_mtu = {UNDERLAY_MTU}\n{workers}{tlv}\nflows = [{flows}]\n\n\
         [[port]]\nname = \"up\"\nofport = 1\n{uplink}\n\n\
         [[port]]\nname = \"{port}\"\nofport = 2\ntype = \"{port_type}\"\nnetns = \"{tenant_ns}\"\naddress = \"{}/24\"\nmtu = {}\n",
        TENANT[i],
        v.tenant_mtu(),
        ctl = topo.ctl_path(i),
        port = topo.names.port,
        workers = workers.map(|w| format!("workers = {w}\n")).unwrap_or_default()
            + &spin_us.map(|s| format!("spin_us = {s}\n")).unwrap_or_default(),
    )
}

/// The tenant MTU is right: a DF ping of exactly the MTU passes, both ways.
/// Tried for up to 10 s: a ping that fails at once (no route yet) must not
/// use up the attempts.
fn check_mtu(v: Variant, topo: &Topology) -> Result<(), LabError> {
    let size = (v.tenant_mtu() - 28).to_string();
    for (from, to) in [(&topo.t[0], TENANT[1]), (&topo.t[1], TENANT[0])] {
        let end = Instant::now() + Duration::from_secs(10);
        let mut ok = false;
        while Instant::now() < end {
            if from
                .run(&[
                    "ping", "-q", "-c", "1", "-W", "1", "-M", "do", "-s", &size, to,
                ])
                .is_ok()
            {
                ok = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !ok {
            return Err(LabError::Setup(format!(
                "{}: a DF ping of {} bytes (the tenant MTU {}) from {} to {to} does not pass",
                v.name(),
                v.tenant_mtu(),
                v.tenant_mtu(),
                from.role
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command, Stdio};

    fn running(daemons: Vec<Child>) -> Running {
        let mut r = Running::new(Variant::TunlabGeneve, None);
        r.daemons = daemons.into_iter().map(Daemon::local).collect();
        r
    }

    fn sh(script: &str) -> Child {
        Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_daemon_that_died_is_named_with_its_last_words() {
        let mut r = running(vec![
            sh("sleep 30"),
            sh("echo starting >&2; echo 'tunlab switch: worker 1: boom' >&2; exit 3"),
        ]);
        let end = std::time::Instant::now() + Duration::from_secs(10);
        let why = loop {
            if let Some(w) = r.exited() {
                break w;
            }
            assert!(
                std::time::Instant::now() < end,
                "the failing daemon never exited"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            why.starts_with("the switch on h2 exited (exit status: 3)"),
            "{why}"
        );
        assert!(
            why.ends_with("starting / tunlab switch: worker 1: boom"),
            "{why}"
        );
        assert!(!why.contains("h1"), "{why}");
    }

    #[test]
    fn the_ovs_endpoints_share_the_shortest_prefix_that_holds_both() {
        assert_eq!(common_prefix(["172.31.0.11", "172.31.0.12"]), 29);
        assert_eq!(common_prefix(["10.0.0.1", "10.0.0.1"]), 32);
        assert_eq!(common_prefix(["10.0.0.1", "11.0.0.1"]), 7);
        assert_eq!(common_prefix(["fd00::1", "fd00::2"]), 126);
        assert_eq!(common_prefix(["10.0.0.1", "fd00::2"]), 0);
        assert_eq!(common_prefix(["10.0.0.1", "nope"]), 0);
    }

    #[test]
    fn daemons_still_running_say_nothing() {
        let mut r = running(vec![sh("sleep 30")]);
        assert_eq!(r.exited(), None);
    }
}
