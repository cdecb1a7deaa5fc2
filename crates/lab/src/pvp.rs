//! The TRex article's PVP topology with tunlab's switch as the compute
//! node: the generator sends Geneve with OVN's option straight at the
//! node; the switch decapsulates to the tenant, which sends every frame
//! back with its MAC addresses swapped (testpmd's macswap); the switch
//! encapsulates it back to the generator, which counts it. The node runs
//! either datapath: userspace (the tenant on a TAP) or the kernel's eBPF
//! one (the tenant on a veth; the slow path only sees first packets).
//!
//! ```text
//!  netns TG (generator)           netns H1 (compute node)                 netns T1 (tenant)
//!  tg0 172.31.0.2 ══ veth ══ under 172.31.0.1 [tunlab switch] ── tap0 [reflector: macswap]
//!      Geneve VNI 6, OVN option ingress 3 / egress 2 ─►   ◄─ ingress 2 / egress 3
//! ```

use crate::host::Host;
use crate::topology::ctl_path;
use crate::LabError;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tunlab_gen::reflect::Reflected;
use tunlab_gen::send::Endpoint;
use tunlab_netio::netns::Veth;

const TG_MAC: &str = "02:00:00:00:00:02";
const NODE_MAC: &str = "02:00:00:00:00:01";
const TG_IP: &str = "172.31.0.2";
const NODE_IP: &str = "172.31.0.1";

/// The frames the generator sends: the article's packet (its outer VLAN
/// left out: the lab's underlay is untagged), addressed to the node, with
/// 8 flows from the inner source address and 8 outer source ports.
pub const DESCRIPTION: &str = "Ether(src=02:00:00:00:00:02,dst=02:00:00:00:00:01)/IP(src=172.31.0.2,dst=172.31.0.1)/UDP(sport=[49152,49153,49154,49155,49156,49157,49158,49159],dport=6081)/GENEVE(vni=6,opt=ovn(ingress=3,egress=2))/Ether(src=fa:16:3e:7f:a1:49,dst=fa:16:3e:a0:1f:28)/IP(src=192.168.2.1-192.168.2.8,dst=192.168.2.181)/UDP(sport=2000,dport=1000)/pad";

/// The same frames in VXLAN (`--tunnel vxlan`): the tunnel the
/// generator's kernel also has, so that sockperf can cross the same node.
pub const DESCRIPTION_VXLAN: &str = "Ether(src=02:00:00:00:00:02,dst=02:00:00:00:00:01)/IP(src=172.31.0.2,dst=172.31.0.1)/UDP(sport=[49152,49153,49154,49155,49156,49157,49158,49159],dport=4789)/VXLAN(vni=6)/Ether(src=fa:16:3e:7f:a1:49,dst=fa:16:3e:a0:1f:28)/IP(src=192.168.2.1-192.168.2.8,dst=192.168.2.181)/UDP(sport=2000,dport=1000)/pad";

/// The tenant's reflector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reflector {
    /// A packet socket: a TPACKET_V2 RX ring in, a TX ring out, in user
    /// space as the article's testpmd is.
    Ring,
    /// An XDP program (generic XDP) that swaps and sends back in the
    /// kernel: no frame reaches user space, so the tenant costs the
    /// shared CPUs least and the node sets the rate.
    Xdp,
}

impl Reflector {
    pub fn parse(s: &str) -> Result<Reflector, String> {
        match s {
            "ring" => Ok(Reflector::Ring),
            "xdp" => Ok(Reflector::Xdp),
            _ => Err(format!("'{s}' is not a reflector (ring, xdp)")),
        }
    }
}

/// How the PVP test is built.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub node: Node,
    pub tunnel: Tunnel,
    pub reflector: Reflector,
}

/// The tenant's address; sockperf's client side is 192.168.2.1.
const TENANT_IP: &str = "192.168.2.181";

/// The tunnel between the generator and the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tunnel {
    /// The article's: Geneve with OVN's option, matched by the node.
    Geneve,
    /// VXLAN, VNI 6: the kernel has it, so sockperf can cross the node.
    Vxlan,
}

impl Tunnel {
    pub fn parse(s: &str) -> Result<Tunnel, String> {
        match s {
            "geneve" => Ok(Tunnel::Geneve),
            "vxlan" => Ok(Tunnel::Vxlan),
            _ => Err(format!("'{s}' is not a PVP tunnel (geneve, vxlan)")),
        }
    }

    /// The generator's frames through this tunnel.
    pub fn description(self) -> &'static str {
        match self {
            Tunnel::Geneve => DESCRIPTION,
            Tunnel::Vxlan => DESCRIPTION_VXLAN,
        }
    }
}

/// The PVP set-up; everything is stopped and removed on drop.
#[derive(Debug)]
pub struct Pvp {
    stop: Arc<AtomicBool>,
    reflector: Option<JoinHandle<Result<Reflected, String>>>,
    switch: Child,
    // Dropped last: the namespaces.
    tg: Host,
    _node: Host,
    tenant: Host,
    tunnel: Tunnel,
}

/// Which datapath the PVP node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Userspace,
    Ebpf,
}

impl Node {
    pub fn parse(s: &str) -> Result<Node, String> {
        match s {
            "userspace" => Ok(Node::Userspace),
            "ebpf" => Ok(Node::Ebpf),
            _ => Err(format!("'{s}' is not a datapath (userspace, ebpf)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Node::Userspace => "userspace",
            Node::Ebpf => "ebpf",
        }
    }
}

/// Where a PVP node's switch meets its generator and tenant.
struct Wiring<'a> {
    node_ip: &'a str,
    gen_ip: &'a str,
    ctl: &'a str,
    /// The tenant port's name (and the tenant's interface's).
    port: &'a str,
    underlay_mtu: u32,
}

/// The MTU of the link between the generator and the node here. The
/// generator's largest frame (9000 B with its FCS, as TRex counts) is the
/// outer frame; the tenant's port (the underlay's MTU less 100) must take
/// the inner one, 58 B less with Geneve and OVN's option: 9100 lets the
/// full profile's 9000-B frames through, where 9000 dropped every one at
/// the tenant's veth (its MTU 8900).
const LINK_MTU: u32 = 9100;

const LOCAL: Wiring<'static> = Wiring {
    node_ip: NODE_IP,
    gen_ip: TG_IP,
    ctl: "",
    port: "tap0",
    underlay_mtu: LINK_MTU,
};

fn config(tenant_ns: &str, node: Node, tunnel: Tunnel, w: &Wiring<'_>) -> String {
    let (datapath, tenant) = match node {
        Node::Userspace => ("", "tap"),
        Node::Ebpf => ("datapath = \"ebpf\"\n", "veth"),
    };
    let (kind, flows) = match tunnel {
        Tunnel::Geneve => (
            "geneve",
            r#"tlv_map = ["{class=0x0102,type=0x80,len=4}->tun_metadata0"]
flows = [
  "in_port=1,tun_metadata0=0x30002 actions=output:2",
  "in_port=2 actions=set_field:0x20003->tun_metadata0,output:1",
]"#,
        ),
        Tunnel::Vxlan => (
            "vxlan",
            r#"flows = [
  "in_port=1 actions=output:2",
  "in_port=2 actions=output:1",
]"#,
        ),
    };
    format!(
        r#"[switch]
name = "pvp"
{datapath}control_socket = "{ctl}"
underlay_mtu = {underlay_mtu}
{flows}

[[port]]
name = "up"
ofport = 1
type = "{kind}"
local_ip = "{node_ip}"
remote_ip = "{gen_ip}"
key = 6

[[port]]
name = "{port}"
ofport = 2
type = "{tenant}"
netns = "{tenant_ns}"
address = "{TENANT_IP}/24"
mtu = {tenant_mtu}
"#,
        ctl = if w.ctl.is_empty() {
            ctl_path("pvp")
        } else {
            w.ctl.to_string()
        },
        node_ip = w.node_ip,
        gen_ip = w.gen_ip,
        port = w.port,
        underlay_mtu = w.underlay_mtu,
        tenant_mtu = w.underlay_mtu - 100,
    )
}

/// The generator's frames through `tunnel` between real machines: the
/// article's packet with the generator's and the node's MAC and IP
/// addresses in its outer headers.
pub fn description_between(
    tunnel: Tunnel,
    gen_mac: &str,
    gen_ip: &str,
    node_mac: &str,
    node_ip: &str,
) -> String {
    tunnel
        .description()
        .replacen(
            &format!("Ether(src={TG_MAC},dst={NODE_MAC})"),
            &format!("Ether(src={gen_mac},dst={node_mac})"),
            1,
        )
        .replacen(
            &format!("IP(src={TG_IP},dst={NODE_IP})"),
            &format!("IP(src={gen_ip},dst={node_ip})"),
            1,
        )
}

/// The PVP node on a real host over SSH: the tenant in a namespace made
/// there, the switch on the host's NIC (its address is the tunnel's
/// end), `tunlab reflect` in the tenant; everything stopped and removed
/// on drop.
#[derive(Debug)]
pub struct RemotePvp {
    ssh: crate::remote::Ssh,
    reflector: Option<crate::host::Daemon>,
    switch: Option<crate::host::Daemon>,
    tenant: Option<Host>,
    workdir: String,
    /// What the check found on the node.
    pub found: crate::remote::Preflight,
    tunnel: Tunnel,
}

impl RemotePvp {
    /// Check the node, put tunlab there, and start the switch (tunnel
    /// from `node_ip` on the node to `gen_ip` here) and the reflector.
    pub fn start(
        ssh: crate::remote::Ssh,
        gen_ip: &str,
        node_ip: &str,
        local_tunlab: &Path,
        setup: Setup,
    ) -> Result<RemotePvp, LabError> {
        let found = crate::remote::check(&ssh, node_ip)?;
        for tool in ["ip", "nft"] {
            if let Some((_, install)) = found.missing.iter().find(|(t, _)| t == tool) {
                return Err(LabError::Setup(format!(
                    "{}: {tool} not found: {install}; nothing was changed there",
                    ssh.dest
                )));
            }
        }
        let tag = crate::remote::run_tag();
        let workdir = format!("/tmp/{tag}");
        let mut pvp = RemotePvp {
            ssh: ssh.clone(),
            reflector: None,
            switch: None,
            tenant: None,
            workdir: workdir.clone(),
            found: found.clone(),
            tunnel: setup.tunnel,
        };
        let tunlab = crate::remote::provision(&ssh, &found, &workdir, local_tunlab)?;
        let tenant = Host::remote_ns(&ssh, &format!("{tag}-pvp-t"), "t1")?;
        let ns = tenant.name().to_string();
        pvp.tenant = Some(tenant);
        let node = Host::remote(ssh.clone(), "h1");
        let port = format!("{tag}p");
        let ctl = format!("{workdir}/pvp.ctl");
        let wiring = Wiring {
            node_ip,
            gen_ip,
            ctl: &ctl,
            port: &port,
            underlay_mtu: found.mtu.max(1280),
        };
        let path = format!("{workdir}/pvp-node.toml");
        node.write_file(
            &path,
            config(&ns, setup.node, setup.tunnel, &wiring).as_bytes(),
            false,
        )?;
        pvp.switch = Some(node.spawn_daemon(&[&tunlab, "switch", "--config", &path])?);
        let ctl = crate::topology::Ctl::remote(ctl, ssh.clone(), tunlab.clone());
        let mut switch = pvp.switch.as_mut().map(|d| &mut d.child);
        crate::topology::wait_for_ctl(&ctl, Duration::from_secs(20), || {
            match switch.as_mut().map(|c| c.try_wait()) {
                Some(Ok(Some(status))) => Some(format!("the PVP node's switch exited ({status})")),
                _ => None,
            }
        })?;
        let kind = match setup.reflector {
            Reflector::Ring => "ring",
            Reflector::Xdp => "xdp",
        };
        let at = format!("{port}@{ns}");
        let mut r = node.spawn_daemon(&[&tunlab, "reflect", &at, "--reflector", kind])?;
        // Its first line after the pid: "ready", or it ended.
        let line = crate::host::read_line(&mut r.child);
        if line.trim() != "ready" {
            let _ = r.child.wait();
            let mut err = String::new();
            if let Some(mut e) = r.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return Err(LabError::Setup(format!(
                "{}: the reflector did not start: {}",
                ssh.dest,
                err.trim()
            )));
        }
        pvp.reflector = Some(r);
        if let Some(t) = &pvp.tenant {
            tenant_stack_off(t, &port)?;
        }
        Ok(pvp)
    }

    /// Stop the reflector; what it reflected and lost.
    pub fn stop_reflector(&mut self) -> Result<Reflected, String> {
        let Some(mut r) = self.reflector.take() else {
            return Ok(Reflected::default());
        };
        r.stop();
        let mut out = String::new();
        if let Some(mut o) = r.child.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut o, &mut out);
        }
        // "reflected N frames, lost M"
        let n: Vec<u64> = out
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|x| x.parse().ok())
            .collect();
        match n[..] {
            [frames, dropped, ..] if out.contains("reflected") => Ok(Reflected { frames, dropped }),
            _ => Err(format!(
                "{}: the reflector said no counts: {}",
                self.ssh.dest,
                out.trim()
            )),
        }
    }

    pub fn tunnel(&self) -> Tunnel {
        self.tunnel
    }
}

impl Drop for RemotePvp {
    fn drop(&mut self) {
        let _ = self.stop_reflector();
        if let Some(mut s) = self.switch.take() {
            s.stop();
        }
        // The tenant's namespace goes before the work folder.
        self.tenant.take();
        let _ = self.ssh.run(&["rm", "-rf", &self.workdir]);
    }
}

/// The tenant's kernel kept from the frames on `port` (see
/// [`Pvp::tenant_stack`]).
fn tenant_stack_off(tenant: &Host, port: &str) -> Result<(), LabError> {
    tenant.run(&["nft", "add", "table", "netdev", "tlpvp"])?;
    tenant.run(&[
        "nft",
        "add",
        "chain",
        "netdev",
        "tlpvp",
        "in",
        &format!("{{ type filter hook ingress device {port} priority 0; policy drop; }}"),
    ])?;
    Ok(())
}

impl Pvp {
    /// Build the namespaces, start the switch on the setup's datapath
    /// with its tunnel to the generator (`tunlab` is its binary; its
    /// configuration goes to `dir`) and its reflector.
    pub fn start(tunlab: &Path, dir: &Path, setup: Setup) -> Result<Pvp, LabError> {
        let Setup {
            node: node_dp,
            tunnel,
            reflector,
        } = setup;
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = 1000 + 3 * NEXT.fetch_add(1, Ordering::Relaxed);
        let tg = Host::create("tg", n)?;
        let node = Host::create("h1", n + 1)?;
        let tenant = Host::create("t1", n + 2)?;
        let (Some(tg_ns), Some(node_ns)) = (tg.netns(), node.netns()) else {
            return Err(LabError::Setup(
                "the PVP test runs in namespaces here".into(),
            ));
        };
        for ns in [tg_ns, node_ns] {
            ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
        }
        let veth = Veth {
            mtu: Some(LINK_MTU),
            // A queue per sender thread, for AF_XDP (one socket a queue).
            queues: Some(8),
            macs: Some((TG_MAC, NODE_MAC)),
        };
        tg_ns.veth("tg0", node_ns.name(), "under", veth)?;
        tg_ns.addr("tg0", &format!("{TG_IP}/24"))?;
        node_ns.addr("under", &format!("{NODE_IP}/24"))?;
        // The generator's frames come to the node's address: its kernel
        // must know the generator's MAC for the way back without asking.
        node.ip(&[
            "neigh",
            "replace",
            TG_IP,
            "lladdr",
            TG_MAC,
            "dev",
            "under",
            "nud",
            "permanent",
        ])?;
        // Geneve coming back to the generator finds no socket there: let
        // its kernel answer with ICMP port unreachable once per 100 s, not
        // once per second.
        tg.run(&["sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=100000"])?;
        std::fs::create_dir_all(dir).map_err(|err| LabError::Io {
            path: dir.display().to_string(),
            err,
        })?;
        let path = dir.join("pvp-node.toml");
        std::fs::write(&path, config(tenant.name(), node_dp, tunnel, &LOCAL)).map_err(|err| {
            LabError::Io {
                path: path.display().to_string(),
                err,
            }
        })?;
        let exe = tunlab.display().to_string();
        let p = path.display().to_string();
        let switch = node.spawn(&[&exe, "switch", "--config", &p])?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut pvp = Pvp {
            stop: stop.clone(),
            reflector: None,
            switch,
            tg,
            _node: node,
            tenant,
            tunnel,
        };
        let switch = &mut pvp.switch;
        crate::topology::wait_for_ctl(
            &crate::topology::Ctl::local(ctl_path("pvp")),
            Duration::from_secs(20),
            || match switch.try_wait() {
                Ok(Some(status)) => Some(format!("the PVP node's switch exited ({status})")),
                _ => None,
            },
        )?;
        let at = Endpoint {
            ifname: "tap0".into(),
            netns: Some(pvp.tenant.name().to_string()),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        pvp.reflector = Some(std::thread::spawn(move || {
            let ready = |r| {
                let _ = tx.send(r);
            };
            match reflector {
                Reflector::Ring => tunlab_gen::reflect::run(&at, &stop, ready),
                Reflector::Xdp => tunlab_gen::reflect::run_xdp(&at, &stop, ready),
            }
        }));
        rx.recv()
            .map_err(|_| LabError::Setup("the reflector thread ended".into()))?
            .map_err(LabError::Setup)?;
        pvp.tenant_stack(false)?;
        Ok(pvp)
    }

    /// Where the generator sends and counts: the same interface.
    pub fn generator(&self) -> Endpoint {
        Endpoint {
            ifname: "tg0".into(),
            netns: Some(self.tg.name().to_string()),
        }
    }

    /// Let the tenant's own kernel see the frames that reach it, or not.
    /// In the article's VM testpmd owns the NIC and the guest's kernel
    /// never sees them; here the reflector's packet socket reads them
    /// before the stack, and an nftables ingress chain (`netdev`, policy
    /// drop) then keeps the tenant's stack from routing each one and
    /// answering it with ICMP, work no VM of the article's does.
    fn tenant_stack(&self, on: bool) -> Result<(), LabError> {
        if on {
            self.tenant
                .run(&["nft", "delete", "table", "netdev", "tlpvp"])?;
            return Ok(());
        }
        tenant_stack_off(&self.tenant, "tap0")
    }

    /// Stop the reflector (frames to the tenant then go unanswered but
    /// by whatever else listens there); what it reflected and lost.
    pub fn stop_reflector(&mut self) -> Result<Reflected, String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.reflector.take() {
            Some(h) => h.join().map_err(|_| "the reflector panicked".to_string())?,
            None => Ok(Reflected::default()),
        }
    }

    /// sockperf's UDP ping-pong through the same node: a kernel VXLAN
    /// device in the generator's namespace (192.168.2.1, VNI 6, to the
    /// node) is the client's side, a sockperf server in the tenant
    /// answers. `size`-byte messages at `mps` a second for `secs`. The
    /// reflector is stopped first (it would answer sockperf's messages
    /// too); the VXLAN device is removed after.
    pub fn sockperf(
        &mut self,
        size: usize,
        mps: u32,
        secs: u32,
    ) -> Result<crate::traffic::Sockperf, String> {
        if self.tunnel != Tunnel::Vxlan {
            return Err(
                "sockperf crosses the node only in a tunnel the generator's kernel has: \
                 --tunnel vxlan (this kernel has no Geneve device)"
                    .into(),
            );
        }
        self.stop_reflector()?;
        let e = |e: LabError| e.to_string();
        self.tenant_stack(true).map_err(e)?;
        self.tg
            .ip(&[
                "link", "add", "tlvx0", "mtu", "8900", "type", "vxlan", "id", "6", "local", TG_IP,
                "remote", NODE_IP, "dstport", "4789", "dev", "tg0",
            ])
            .map_err(e)?;
        let r = (|| {
            self.tg
                .ip(&["addr", "add", "192.168.2.1/24", "dev", "tlvx0"])
                .map_err(e)?;
            self.tg.ip(&["link", "set", "tlvx0", "up"]).map_err(e)?;
            crate::traffic::ping_pong(&self.tg, &self.tenant, TENANT_IP, size, mps, secs)
        })();
        let _ = self.tg.ip(&["link", "del", "tlvx0"]);
        r
    }

    /// The switch's process id (for its CPU).
    pub fn switch_pid(&self) -> u32 {
        self.switch.id()
    }
}

impl Drop for Pvp {
    fn drop(&mut self) {
        let _ = self.stop_reflector();
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.switch.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.switch.wait();
    }
}
