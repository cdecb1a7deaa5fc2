//! Shared helpers for the namespace tests: a four-namespace lab (two
//! hosts joined by a veth underlay, a tenant behind each), running
//! `tunlab switch` processes, and traffic checks run inside namespaces.
#![allow(dead_code)]

pub mod faults;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tunlab_ctl::Stats;
use tunlab_netio::netns::{self, Netns};

pub static CASE: AtomicUsize = AtomicUsize::new(0);

/// A running `tunlab switch`, stopped (SIGTERM) when dropped; its stderr
/// (counters) is returned by [`Switch::stop`].
pub struct Switch {
    child: Option<Child>,
    /// Its control socket, which it serves once every port is open.
    ctl: std::path::PathBuf,
}

/// `ip netns exec NS tunlab switch --config PATH`, as the README starts
/// a node; the caller adds arguments and runs it.
pub fn switch_command(ns: &str, path: &std::path::Path) -> Command {
    let mut c = Command::new("ip");
    c.args([
        "netns",
        "exec",
        ns,
        env!("CARGO_BIN_EXE_tunlab"),
        "switch",
        "--config",
    ])
    .arg(path);
    c
}

impl Switch {
    pub fn start(ns: &str, config: &str, dir: &std::path::Path, name: &str) -> Switch {
        Switch::start_with(ns, config, dir, name, &[])
    }

    /// [`Switch::start`] with more arguments (`--keep-datapath`).
    pub fn start_with(
        ns: &str,
        config: &str,
        dir: &std::path::Path,
        name: &str,
        more: &[&str],
    ) -> Switch {
        let path = dir.join(format!("{name}.toml"));
        // Each switch gets its own control socket, so parallel tests never
        // share /run/tunlab/NAME.ctl.
        let given = config.lines().find_map(|l| {
            l.strip_prefix("control_socket = ")
                .map(|v| std::path::PathBuf::from(v.trim().trim_matches('"')))
        });
        let ctl = given
            .clone()
            .unwrap_or_else(|| dir.join(format!("{name}.ctl")));
        let config = if given.is_some() {
            config.to_string()
        } else {
            with_ctl(config, &ctl)
        };
        std::fs::write(&path, config).unwrap();
        let child = switch_command(ns, &path)
            .args(more)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tunlab switch");
        Switch {
            child: Some(child),
            ctl,
        }
    }

    /// Wait until the node has opened every port (it then serves its
    /// control socket): a kernel-datapath node's tenant veth is up before
    /// its tunnel sockets are bound.
    pub fn wait_ready(&self) {
        wait_for_ctl(&self.ctl);
    }

    /// The switch's process id (`ip netns exec` runs it in its own place).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// How many file descriptors the switch holds.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }

    pub fn ctl_path(&self) -> &std::path::Path {
        &self.ctl
    }

    /// `kill -9`: no chance to clean up; its stderr so far.
    pub fn kill9(mut self) -> String {
        let mut child = self.child.take().unwrap();
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Its statistics, through its control socket.
    pub fn stats(&self) -> Stats {
        tunlab_ctl::stats(self.ctl_path()).unwrap_or_else(|e| panic!("stats: {e}"))
    }

    pub fn stop(mut self) -> String {
        let child = self.child.take().unwrap();
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub struct Lab {
    pub ta: Netns,
    pub tb: Netns,
    pub hv1: Netns,
    pub hv2: Netns,
    /// The underlay veth ends in hv1 and hv2.
    pub u1: String,
    pub u2: String,
    pub dir: std::path::PathBuf,
}

pub fn lab() -> Lab {
    let n = CASE.fetch_add(1, Ordering::SeqCst) * 4;
    let hv1 = Netns::create("tl-sw", n).expect("netns (needs root)");
    let hv2 = Netns::create("tl-sw", n + 1).unwrap();
    let ta = Netns::create("tl-sw", n + 2).unwrap();
    let tb = Netns::create("tl-sw", n + 3).unwrap();
    let u1 = format!("tlu{}a{n}", std::process::id() % 10000);
    let u2 = format!("tlu{}b{n}", std::process::id() % 10000);
    hv1.veth(&u1, hv2.name(), &u2, netns::Veth::default())
        .unwrap();
    for (ns, dev, v4, v6) in [
        (&hv1, &u1, "172.31.0.1/24", "fd00:31::1/64"),
        (&hv2, &u2, "172.31.0.2/24", "fd00:31::2/64"),
    ] {
        ns.addr(dev, v4).unwrap();
        ns.addr(dev, v6).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("tunlab-switch-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Lab {
        ta,
        tb,
        hv1,
        hv2,
        u1,
        u2,
        dir,
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[allow(clippy::too_many_arguments)]
pub fn node_config(
    name: &str,
    tenant_ns: &str,
    tenant_ip: &str,
    kind: &str,
    local: &str,
    remote: &str,
    vni: u32,
    accept_vni: u32,
) -> String {
    format!(
        r#"
[switch]
name = "{name}"
flows = [
  "in_port=1 actions=output:10",
  "in_port=10,tun_id={accept_vni} actions=output:1",
]

[[port]]
name = "tap-{name}"
ofport = 1
type = "tap"
netns = "{tenant_ns}"
address = "{tenant_ip}/24"

[[port]]
name = "t-{name}"
ofport = 10
type = "{kind}"
local_ip = "{local}"
remote_ip = "{remote}"
key = {vni}
"#
    )
}

/// The usual pair of node configurations for `lab()`: n1 (tenant
/// 192.168.7.1, underlay 172.31.0.1) and n2 (.2), one TAP and one tunnel
/// port of `kind` with VNI/key 6.
pub fn pair_configs(l: &Lab, kind: &str) -> (String, String) {
    (
        node_config(
            "n1",
            l.ta.name(),
            "192.168.7.1",
            kind,
            "172.31.0.1",
            "172.31.0.2",
            6,
            6,
        ),
        node_config(
            "n2",
            l.tb.name(),
            "192.168.7.2",
            kind,
            "172.31.0.2",
            "172.31.0.1",
            6,
            6,
        ),
    )
}

/// Retries a socket call that the kernel interrupted. A socket with a
/// read timeout is never restarted after a stop and continue (signal(7)),
/// even with no handler installed: CI saw a test's reader fail with EINTR.
pub fn retry_eintr<T>(mut call: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    loop {
        match call() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Run `f` in a thread inside namespace `ns`.
pub fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        netns::enter(&ns).unwrap();
        f()
    })
}

pub fn wait_for_tap(ns: &Netns, dev: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(out) = ns.ip(&["-o", "addr", "show", "dev", dev]) {
            if out.contains("inet ") {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("tap {dev} did not come up in {}", ns.name());
}

/// Wait until a node's control socket is there: a kernel-datapath node's
/// tenant device comes up before the node serves its socket.
pub fn wait_for_ctl(sock: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    // Accepting, not only there: a killed switch leaves its socket file.
    while std::os::unix::net::UnixStream::connect(sock).is_err() {
        assert!(
            Instant::now() < deadline,
            "{} never answered",
            sock.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// UDP echo from `a` to `b`: true if every one of `count` datagrams came
/// back (each tried up to `tries` times: ARP may eat the first).
pub fn udp_echo(a: &Netns, b: &Netns, b_ip: &str, count: u8, tries: usize) -> bool {
    let server = in_ns(b.name(), {
        let b_ip = b_ip.to_string();
        move || {
            let s = UdpSocket::bind(format!("{b_ip}:7000")).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
            let mut buf = [0u8; 2000];
            let mut n = 0;
            // Stop when the client has gone quiet.
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            while let Ok((len, from)) = retry_eintr(|| s.recv_from(&mut buf)) {
                s.send_to(&buf[..len], from).unwrap();
                n += 1;
            }
            n
        }
    });
    std::thread::sleep(Duration::from_millis(100));
    let client = in_ns(a.name(), {
        let b_ip = b_ip.to_string();
        move || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let dst: SocketAddr = format!("{b_ip}:7000").parse().unwrap();
            let mut ok = 0;
            for i in 0..count {
                let msg = vec![i; 100 + i as usize * 50];
                // ARP resolution may eat the first datagram: retry each.
                for _ in 0..tries {
                    s.send_to(&msg, dst).unwrap();
                    let mut buf = [0u8; 2000];
                    if let Ok(n) = s.recv(&mut buf) {
                        if buf[..n] == msg[..] {
                            ok += 1;
                            break;
                        }
                    }
                }
            }
            ok
        }
    });
    let ok = client.join().unwrap();
    let _ = server.join();
    ok == count as usize
}

/// A 2 MB TCP transfer from `a` to `b`; returns (sent sum, received sum).
pub fn tcp_transfer(a: &Netns, b: &Netns, b_ip: &str) -> (u64, u64) {
    tcp_transfer_via(a, b, b_ip, b_ip)
}

/// [`tcp_transfer`] to a server listening on `listen_ip` in `b`, the
/// client connecting to `connect_ip` (another address, which the switch
/// rewrites on the way: a DNAT).
pub fn tcp_transfer_via(a: &Netns, b: &Netns, listen_ip: &str, connect_ip: &str) -> (u64, u64) {
    let b_ip = listen_ip;
    let data: Vec<u8> = (0..2_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let sent: u64 = data
        .iter()
        .enumerate()
        .map(|(i, &x)| x as u64 * (i as u64 % 251 + 1))
        .sum();
    let server = in_ns(b.name(), {
        let b_ip = b_ip.to_string();
        move || {
            let l = TcpListener::bind(format!("{b_ip}:7001")).unwrap();
            let (mut c, _) = l.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            got.iter()
                .enumerate()
                .map(|(i, &x)| x as u64 * (i as u64 % 251 + 1))
                .sum::<u64>()
        }
    });
    std::thread::sleep(Duration::from_millis(100));
    let client = in_ns(a.name(), {
        let b_ip = connect_ip.to_string();
        move || {
            let mut c = TcpStream::connect_timeout(
                &format!("{b_ip}:7001").parse().unwrap(),
                Duration::from_secs(5),
            )
            .unwrap();
            // A broken path fails the test instead of hanging it.
            c.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
            c.write_all(&data).unwrap();
        }
    });
    client.join().unwrap();
    (sent, server.join().unwrap())
}

/// Insert `control_socket = PATH` into a node config's `[switch]` table.
pub fn with_ctl(cfg: &str, path: &std::path::Path) -> String {
    cfg.replacen(
        "[switch]\n",
        &format!("[switch]\ncontrol_socket = \"{}\"\n", path.display()),
        1,
    )
}

pub fn ctl(sock: &std::path::Path, req: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tunlab"))
        .arg("ctl")
        .arg("--socket")
        .arg(sock)
        .args(req)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// UDP echo (10 datagrams) and a 2 MB TCP transfer with a byte checksum,
/// ta -> tb and tb -> ta; `what` names the pair in failures.
pub fn traffic_both_ways(l: &Lab, what: &str) {
    for (from, to) in [(&l.ta, "192.168.7.2"), (&l.tb, "192.168.7.1")] {
        // The first packets warm the path (ARP across the tunnel, Open
        // vSwitch's upcalls); on a busy machine that once took longer than
        // one ping round (2.4 s), so up to three rounds.
        let ok = (0..3).any(|_| {
            Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    from.name(),
                    "ping",
                    "-q",
                    "-c",
                    "3",
                    "-i",
                    "0.2",
                    "-W",
                    "2",
                    to,
                ])
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        assert!(
            ok,
            "{what}: ping {to} from {}\n{}",
            from.name(),
            both_nodes(l)
        );
    }
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6),
        "{what}: UDP a->b\n{}",
        both_nodes(l)
    );
    assert!(
        udp_echo(&l.tb, &l.ta, "192.168.7.1", 10, 6),
        "{what}: UDP b->a\n{}",
        both_nodes(l)
    );
    let (s, r) = tcp_transfer(&l.ta, &l.tb, "192.168.7.2");
    assert_eq!(s, r, "{what}: TCP a->b bytes differ\n{}", both_nodes(l));
    let (s, r) = tcp_transfer(&l.tb, &l.ta, "192.168.7.1");
    assert_eq!(s, r, "{what}: TCP b->a bytes differ\n{}", both_nodes(l));
}

/// Both tunlab nodes' statistics, rules and cached flows (`tunlab ctl`
/// on DIR/n1.ctl and DIR/n2.ctl), for a failure's message: what each
/// switch did with the traffic that did not arrive.
pub fn both_nodes(l: &Lab) -> String {
    ["n1", "n2"]
        .iter()
        .map(|n| {
            let sock = l.dir.join(format!("{n}.ctl"));
            let (_, st, e1) = ctl(&sock, &["stats"]);
            let (_, rules, e2) = ctl(&sock, &["dump-flows"]);
            let (_, dp, e3) = ctl(&sock, &["dump-flows", "--datapath"]);
            format!("== {n} stats\n{st}{e1}== {n} rules\n{rules}{e2}== {n} cached flows\n{dp}{e3}")
        })
        .collect()
}

/// Start node n1 in hv1 and n2 in hv2 with these configurations and wait
/// until both tenant TAPs are up.
pub fn start_pair(l: &Lab, n1: &str, n2: &str) -> (Switch, Switch) {
    let s1 = Switch::start(l.hv1.name(), n1, &l.dir, "n1");
    let s2 = Switch::start(l.hv2.name(), n2, &l.dir, "n2");
    wait_for_tap(&l.ta, "tap-n1");
    wait_for_tap(&l.tb, "tap-n2");
    s1.wait_ready();
    s2.wait_ready();
    (s1, s2)
}

/// A userspace node configuration turned into the kernel datapath's: the
/// TAP tenant port becomes a veth port (its peer in the tenant namespace
/// has the same name), the flow cache small. The datapath is left to its
/// default, auto, which takes the kernel for a veth port: every kernel
/// test runs the switch as the README starts it.
pub fn on_kernel(cfg: &str) -> String {
    cfg.replacen("[switch]\n", "[switch]\nflow_cache = 4096\n", 1)
        .replace("type = \"tap\"", "type = \"veth\"")
}

/// A counter of a node's statistics (`kernel_hits`, `dropped REASON`; 0
/// if absent).
pub fn counter(stats: &Stats, name: &str) -> u64 {
    stats.counter(name)
}

/// `tunlab ctl stats` of the node whose control socket is DIR/NODE.ctl.
pub fn node_stats(dir: &std::path::Path, node: &str) -> Stats {
    tunlab_ctl::stats(&dir.join(format!("{node}.ctl"))).unwrap_or_else(|e| panic!("{node}: {e}"))
}

/// The kernel datapath carried traffic both ways on this node: it
/// encapsulated and decapsulated more than the slow path's first packets.
pub fn assert_kernel_carried(dir: &std::path::Path, node: &str, what: &str) {
    let st = node_stats(dir, node);
    assert!(counter(&st, "kernel_installed") > 0, "{what} {node}: {st}");
    assert!(counter(&st, "kernel_encap") > 20, "{what} {node}: {st}");
    assert!(counter(&st, "kernel_decap") > 20, "{what} {node}: {st}");
    // The port lines include what the kernel carried: at least as many
    // frames in and out over the ports as it encapsulated and
    // decapsulated.
    let (rx, tx) = st.port_totals();
    let kernel = counter(&st, "kernel_encap") + counter(&st, "kernel_decap");
    assert!(
        rx >= kernel && tx >= kernel,
        "{what} {node}: rx {rx}, tx {tx}, kernel {kernel}: {st}"
    );
}

/// The number after `label` (up to the next comma) on each line of a dump
/// that has one: `n_packets=` of `dump-flows`, `packets:` of a datapath's.
pub fn numbers_after<'a>(dump: &'a str, label: &'a str) -> impl Iterator<Item = u64> + 'a {
    dump.lines().filter_map(move |l| {
        l.split(label)
            .nth(1)?
            .split(',')
            .next()?
            .parse::<u64>()
            .ok()
    })
}

/// The userspace datapath's flow cache carried traffic on this node: most
/// packets hit a cached flow, the flows are listed with their counters,
/// and the rules were credited with what the cached flows carried (a
/// control request credits them first).
pub fn assert_netdev_cached(dir: &std::path::Path, node: &str, what: &str) {
    let st = node_stats(dir, node);
    let (hits, misses) = (
        counter(&st, "netdev_flow_hits"),
        counter(&st, "netdev_flow_misses"),
    );
    assert!(hits > 20 && hits > misses, "{what} {node}: {st}");
    assert!(
        counter(&st, "netdev_flows_installed") > 0,
        "{what} {node}: {st}"
    );
    let sock = dir.join(format!("{node}.ctl"));
    let (ok, dump, err) = ctl(&sock, &["dump-flows", "--datapath"]);
    assert!(
        ok && dump.contains("in_port(") && dump.contains("actions:"),
        "{what} {node}: {dump}{err}"
    );
    let cached: u64 = numbers_after(&dump, "packets:").sum();
    assert!(cached > 0, "{what} {node}: {dump}");
    // Every packet the rules decided or a cached flow carried is on the
    // rules' counters.
    let (ok, rules, err) = ctl(&sock, &["dump-flows"]);
    let credited: u64 = numbers_after(&rules, "n_packets=").sum();
    assert!(ok, "{err}");
    assert!(
        credited >= hits,
        "{what} {node}: the rules count {credited} packets, the cache hit {hits}: {rules}"
    );
}

/// `bpftool net show [ARGS]` in namespace `ns`: the programs attached to
/// its devices.
pub fn attached_programs(ns: &Netns, args: &[&str]) -> String {
    let cmd = [
        &["ip", "netns", "exec", ns.name(), "bpftool", "net", "show"][..],
        args,
    ]
    .concat();
    netns::run(&cmd).expect("bpftool net show")
}

/// Which datapath a namespace test runs its nodes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datapath {
    Userspace,
    /// The default datapath (auto, which takes the kernel for them),
    /// tenants on veth ports; the test also checks that the kernel carried
    /// the traffic.
    Kernel,
    /// The default datapath, tenants on veths the test made beforehand (as
    /// a container runtime would), attached as `type = "system"` ports.
    KernelSystem,
}

impl Datapath {
    /// The configuration for this datapath, for a node in namespace `hv`;
    /// for system ports, their devices are made here.
    pub fn config(self, hv: &Netns, cfg: String) -> String {
        match self {
            Datapath::Userspace => cfg,
            Datapath::Kernel => on_kernel(&cfg),
            Datapath::KernelSystem => on_system(hv, &on_kernel(&cfg)),
        }
    }

    pub fn on_kernel(self) -> bool {
        self != Datapath::Userspace
    }

    /// The kind `tunlab ctl` gives the tenant ports on this datapath.
    pub fn tenant_kind(self) -> &'static str {
        match self {
            Datapath::Userspace => "tap",
            Datapath::Kernel => "veth",
            Datapath::KernelSystem => "system",
        }
    }
}

/// A kernel-datapath configuration whose veth ports become system ports:
/// each veth pair (this end in `hv`, the other of the same name in the
/// tenant's namespace with the port's address, MTU 1400) is made here,
/// and the port names the device.
pub fn on_system(hv: &Netns, cfg: &str) -> String {
    let mut out = String::new();
    let mut name = String::new();
    let mut lines = cfg.lines().peekable();
    while let Some(l) = lines.next() {
        if let Some(n) = l.strip_prefix("name = ") {
            name = n.trim_matches('"').to_string();
        }
        if l != "type = \"veth\"" {
            out.push_str(l);
            out.push('\n');
            continue;
        }
        out.push_str("type = \"system\"\n");
        let (mut ns, mut addr) = (None, None);
        while let Some(k) = lines.peek() {
            if let Some(v) = k.strip_prefix("netns = ") {
                ns = Some(v.trim_matches('"').to_string());
            } else if let Some(v) = k.strip_prefix("address = ") {
                addr = Some(v.trim_matches('"').to_string());
            } else {
                break;
            }
            lines.next();
        }
        let ns = ns.expect("a veth port names its tenant's namespace");
        let veth = netns::Veth {
            mtu: Some(1400),
            ..netns::Veth::default()
        };
        hv.veth(&name, &ns, &name, veth).unwrap();
        if let Some(a) = addr {
            netns::ip(&ns, &["addr", "add", &a, "dev", &name]).unwrap();
        }
    }
    out
}

/// Two nodes, one tunnel of `kind` (over an IPv6 underlay if `v6`): UDP
/// echo and TCP both ways.
pub fn two_nodes(kind: &str, v6: bool, dp: Datapath) {
    let l = lab();
    let (a, b) = if v6 {
        ("fd00:31::1", "fd00:31::2")
    } else {
        ("172.31.0.1", "172.31.0.2")
    };
    let (s1, s2) = start_pair(
        &l,
        &dp.config(
            &l.hv1,
            node_config("n1", l.ta.name(), "192.168.7.1", kind, a, b, 6, 6),
        ),
        &dp.config(
            &l.hv2,
            node_config("n2", l.tb.name(), "192.168.7.2", kind, b, a, 6, 6),
        ),
    );
    traffic_both_ways(&l, &format!("{kind} ({dp:?})"));
    if !dp.on_kernel() {
        for node in ["n1", "n2"] {
            assert_netdev_cached(&l.dir, node, kind);
        }
    }
    if dp.on_kernel() {
        for node in ["n1", "n2"] {
            assert_kernel_carried(&l.dir, node, kind);
        }
        let (ok, dump, err) = ctl(&l.dir.join("n1.ctl"), &["dump-flows", "--datapath"]);
        assert!(
            ok && dump.contains("tnl_push")
                && dump.contains(if dp == Datapath::KernelSystem {
                    "output(dev ifindex" // out through the device, whatever it is
                } else {
                    "output(ifindex" // into the veth peer's namespace
                }),
            "{dump}{err}"
        );
    }
    let e1 = s1.stop();
    let e2 = s2.stop();
    assert!(e1.contains("port 10 t-n1 ("), "{e1}");
    assert!(e2.contains("rx "), "{e2}");
    if dp == Datapath::KernelSystem {
        // The switch leaves a system port's device as it found it, with
        // no program attached.
        let progs = attached_programs(&l.hv1, &["dev", "tap-n1"]);
        assert!(!progs.contains("tl_"), "{progs}");
        assert!(
            l.hv1.ip(&["link", "show", "tap-n1"]).is_ok(),
            "the device stays"
        );
    }
}

/// Ports added and removed while running: a second tenant and a Geneve
/// tunnel for it join both nodes through `tunlab ctl add-port`, carry
/// traffic, and leave through `del-port`; the first tenant's VXLAN traffic
/// carries on throughout. A clashing or malformed port is refused with a
/// message naming it, and changes nothing. On the kernel datapath the
/// added tenants are veth ports, and the kernel carries their traffic.
pub fn ports_at_run_time(dp: Datapath) {
    let l = lab();
    let (c1, c2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
    let (s1, s2) = start_pair(
        &l,
        &with_ctl(
            &dp.config(
                &l.hv1,
                node_config(
                    "n1",
                    l.ta.name(),
                    "192.168.7.1",
                    "vxlan",
                    "172.31.0.1",
                    "172.31.0.2",
                    6,
                    6,
                ),
            ),
            &c1,
        ),
        &with_ctl(
            &dp.config(
                &l.hv2,
                node_config(
                    "n2",
                    l.tb.name(),
                    "192.168.7.2",
                    "vxlan",
                    "172.31.0.2",
                    "172.31.0.1",
                    6,
                    6,
                ),
            ),
            &c2,
        ),
    );
    let (ok, _, err) = ctl(&c1, &["add-port", "x ofport=10 type=tap"]);
    assert!(
        !ok && err.contains("clashes with port 't-n1' (ofport 10)"),
        "{err}"
    );
    let (ok, _, err) = ctl(
        &c1,
        &[
            "add-port",
            "g-n1 ofport=11 type=geneve local_ip=172.31.0.1 remote_ip=nowhere",
        ],
    );
    assert!(
        !ok && err.contains("port 'g-n1': remote_ip: 'nowhere' is not an IP address"),
        "{err}"
    );
    if !dp.on_kernel() {
        let (ok, _, err) = ctl(&c1, &["add-port", "v9 ofport=20 type=system"]);
        assert!(
            !ok && err.contains("port 'v9': veth and system ports need the kernel datapath"),
            "{err}"
        );
    }
    let (_, show, _) = ctl(&c1, &["show"]);
    assert!(
        !show.contains("g-n1") && !show.contains(" x"),
        "refused ports left a trace: {show}"
    );
    add_tenant_over_geneve(&l, &c1, &c2, if dp.on_kernel() { "veth" } else { "tap" });
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.8.2", 10, 6),
        "the added tenant over the added Geneve port"
    );
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6),
        "the first tenant over VXLAN, undisturbed"
    );
    let (ok, show, _) = ctl(&c1, &["show"]);
    assert!(
        ok && show.contains(" 11(g-n1): geneve")
            && show.contains(&format!(" 6(tap5-n1): {}", dp.tenant_kind())),
        "{show}"
    );
    if dp.on_kernel() {
        // The added ports' flows are the kernel's: a Geneve push from the
        // added veth, and the added tunnel decapsulated to it.
        let (ok, dump, err) = ctl(&c1, &["dump-flows", "--datapath"]);
        assert!(
            ok && dump.contains("in_port(6)") && dump.contains("in_port(11)"),
            "{dump}{err}"
        );
    }
    let (ok, _, err) = ctl(&c1, &["del-port", "g-n1"]);
    assert!(ok, "{err}");
    let (_, show, _) = ctl(&c1, &["show"]);
    assert!(!show.contains("g-n1"), "{show}");
    assert!(
        !udp_echo(&l.ta, &l.tb, "192.168.8.2", 1, 2),
        "a removed port carries nothing"
    );
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6),
        "the first tenant still undisturbed"
    );
    let (ok, _, err) = ctl(&c1, &["del-port", "g-n1"]);
    assert!(!ok && err.contains("no port named 'g-n1'"), "{err}");
    let e1 = s1.stop();
    s2.stop();
    assert!(
        e1.contains("dropped no_such_port: "),
        "rules to the removed port count their drops: {e1}"
    );
}

/// Frames a tenant's device has received (its kernel's counter).
pub fn tenant_rx(ns: &Netns, dev: &str) -> u64 {
    netns::run(&[
        "ip",
        "netns",
        "exec",
        ns.name(),
        "cat",
        &format!("/sys/class/net/{dev}/statistics/rx_packets"),
    ])
    .expect("the tenant's rx counter")
    .trim()
    .parse()
    .expect("a number")
}

/// A `dropped REASON: N` line of a node's counters (0 if absent).
pub fn dropped(stats: &Stats, reason: &str) -> u64 {
    counter(stats, &format!("dropped {reason}"))
}

/// A packet with a VNI no rule accepts is dropped and counted, and
/// nothing reaches the tenant (on the kernel datapath the slow path's drop
/// is cached and the kernel drops the rest): n2 accepts only VNI 7.
pub fn wrong_vni(dp: Datapath) {
    isolated(
        dp,
        "geneve",
        "172.31.0.1",
        7,
        "no_rule",
        "kernel_drop_action",
    );
}

/// A packet from an outer source that no tunnel port expects is dropped
/// and counted, whatever its VNI: n2 expects its peer at 172.31.0.9. The
/// kernel datapath does not decapsulate for a remote it does not know: the
/// slow path sees the packet and drops it.
pub fn unknown_remote(dp: Datapath) {
    isolated(
        dp,
        "vxlan",
        "172.31.0.9",
        6,
        "unknown_remote",
        "kernel_slow_unknown_remote",
    );
}

/// n1 sends to n2 over `kind` with VNI 6; n2 expects its peer at
/// `n2_remote` and accepts VNI `n2_vni`. Every packet is dropped at n2
/// with `reason` counted (on the kernel datapath also `kernel_counter`),
/// and nothing reaches n2's tenant.
fn isolated(
    dp: Datapath,
    kind: &str,
    n2_remote: &str,
    n2_vni: u32,
    reason: &str,
    kernel_counter: &str,
) {
    let l = lab();
    let n1 = node_config(
        "n1",
        l.ta.name(),
        "192.168.7.1",
        kind,
        "172.31.0.1",
        "172.31.0.2",
        6,
        6,
    );
    let n2 = node_config(
        "n2",
        l.tb.name(),
        "192.168.7.2",
        kind,
        "172.31.0.2",
        n2_remote,
        n2_vni,
        n2_vni,
    );
    let (s1, s2) = start_pair(&l, &dp.config(&l.hv1, n1), &dp.config(&l.hv2, n2));
    assert!(!udp_echo(&l.ta, &l.tb, "192.168.7.2", 1, 4));
    let rx = tenant_rx(&l.tb, "tap-n2");
    let st2 = s2.stats();
    let _ = s1.stop();
    let e2 = s2.stop();
    assert!(dropped(&st2, reason) > 0, "{st2}");
    assert_eq!(rx, 0, "the tenant received frames: {e2}");
    assert!(
        e2.contains(&format!("port 1 tap-n2 ({}): rx ", dp.tenant_kind()))
            && e2.contains(", tx 0 pkts 0 bytes"),
        "{e2}"
    );
    if dp.on_kernel() {
        assert!(counter(&st2, kernel_counter) > 0, "{st2}");
    }
}

/// Malformed packets from the underlay and from a tenant are dropped and
/// counted, and the switch carries on forwarding everything else.
pub fn malformed_packets(dp: Datapath) {
    let l = lab();
    let (n1, n2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &dp.config(&l.hv1, n1), &dp.config(&l.hv2, n2));
    // From n1's known peer address, to its Geneve port.
    in_ns(l.hv2.name(), || {
        let s = UdpSocket::bind("172.31.0.2:0").unwrap();
        let bad: [&[u8]; 5] = [
            &[0x01, 0x02, 0x03],                // shorter than the header
            &[0x3f, 0, 0x65, 0x58, 0, 0, 6, 0], // 252 bytes of options, none there
            &[0x01, 0x40, 0x65, 0x58, 0, 0, 6, 0, 0xff, 0xff, 0x80, 0], // unknown critical option
            &[0x00, 0x00, 0x65, 0x58, 0, 0, 6, 0], // no inner frame at all
            &[0xa5; 200],
        ];
        for b in bad {
            s.send_to(b, "172.31.0.1:6081").unwrap();
        }
    })
    .join()
    .unwrap();
    // From the tenant: frames its kernel would never send, through a
    // packet socket on its TAP.
    in_ns(l.ta.name(), || {
        let p = tunlab_netio::PacketSocket::open("tap-n1").unwrap();
        let mut ipv4_lies = vec![0xffu8; 12];
        ipv4_lies.extend_from_slice(&[0x08, 0x00, 0x4f, 0, 0xff, 0xff, 0, 0]);
        for f in [&[0u8; 14][..], &ipv4_lies[..], &[0x86, 0xdd][..]] {
            let _ = p.send(f);
        }
    })
    .join()
    .unwrap();
    traffic_both_ways(&l, "geneve after malformed packets");
    let e1 = s1.stats();
    let exit = s1.stop();
    s2.stop();
    // The 0xa5 bytes read as Geneve with an unknown critical option (type
    // 0xa5 has the critical bit): that error is the one counted for it.
    // The kernel datapath drops what it recognises as such itself.
    assert_eq!(
        dropped(&e1, "unknown_critical_option")
            + counter(&e1, "kernel_drop_unknown_critical_option"),
        2,
        "{e1}"
    );
    assert_eq!(dropped(&e1, "malformed_tunnel_header"), 2, "{e1}");
    // The header with no frame behind it (the kernel itself refuses to
    // send the tenant's 2-byte runt; the other two tenant frames are
    // well-formed Ethernet, whatever they claim inside, and are switched).
    assert_eq!(dropped(&e1, "short_frame"), 1, "{e1}");
    assert!(
        e1.ports.iter().all(|p| p.tx_errors == 0),
        "nothing malformed reached a device: {e1}"
    );
    // The counters printed on exit are the same text.
    assert!(exit.contains("dropped short_frame: 1"), "{exit}");
}

/// At run time on both nodes (control sockets `c1`, `c2`): a second tenant
/// port of `kind` (`tap5-n1`/`-n2`, ofport 6, 192.168.8.0/24) and a Geneve
/// port (ofport 11, VNI 9) with flows between them; returns once the
/// tenants' devices are there.
pub fn add_tenant_over_geneve(l: &Lab, c1: &std::path::Path, c2: &std::path::Path, kind: &str) {
    add_tenant_over(l, c1, c2, kind, "geneve");
}

/// As [`add_tenant_over_geneve`], over a tunnel port of type `tunnel`
/// (key 9) to the same remote as the first tenant's.
pub fn add_tenant_over(
    l: &Lab,
    c1: &std::path::Path,
    c2: &std::path::Path,
    kind: &str,
    tunnel: &str,
) {
    add_tenant_with(l, c1, c2, kind, tunnel, "");
}

/// As [`add_tenant_over`], with `extra` KEY=VALUE settings on n1's
/// tenant port (e.g. its policer).
pub fn add_tenant_with(
    l: &Lab,
    c1: &std::path::Path,
    c2: &std::path::Path,
    kind: &str,
    tunnel: &str,
    extra: &str,
) {
    for (c, ns, me, peer, local, remote) in [
        (c1, l.ta.name(), "n1", 1, "172.31.0.1", "172.31.0.2"),
        (c2, l.tb.name(), "n2", 2, "172.31.0.2", "172.31.0.1"),
    ] {
        let mut tap =
            format!("tap5-{me} ofport=6 type={kind} netns={ns} address=192.168.8.{peer}/24");
        if me == "n1" && !extra.is_empty() {
            tap = format!("{tap} {extra}");
        }
        let (ok, _, err) = ctl(c, &["add-port", &tap]);
        assert!(ok, "{err}");
        let g = format!("g-{me} ofport=11 type={tunnel} local_ip={local} remote_ip={remote} key=9");
        let (ok, _, err) = ctl(c, &["add-port", &g]);
        assert!(ok, "{err}");
        assert!(ctl(c, &["add-flow", "in_port=6 actions=output:11"]).0);
        assert!(ctl(c, &["add-flow", "in_port=11,tun_id=9 actions=output:6"]).0);
    }
    wait_for_tap(&l.ta, "tap5-n1");
    wait_for_tap(&l.tb, "tap5-n2");
}

/// Frames crafted to cross from one tenant to another, each kind carrying
/// its own marker, with a sniffer on every tenant device of both nodes
/// (two tenants: VNI 6 on `tap-nX`, VNI 9 on `tap5-nX`):
///
/// - from tenant 1: Geneve packets of VNI 9 (with an option flood) inside
///   its own frames, addressed to the far node's underlay address: they
///   are tenant 1's payload and may reach tenant 1's far side only;
/// - on the underlay from the known remote: VNI 9 with 30 non-critical
///   options (reaches tenant 2 only), VNI 6 with an unknown critical option
///   and VNI 6 claiming 252 bytes of options it does not have (reach
///   nobody, counted);
/// - from an address no port expects, VNI 6 (reaches nobody, counted).
pub fn crafted_frames(dp: Datapath) {
    const N: usize = 20;
    let l = lab();
    let (n1, n2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &dp.config(&l.hv1, n1), &dp.config(&l.hv2, n2));
    let (c1, c2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
    add_tenant_over_geneve(&l, &c1, &c2, dp.tenant_kind());
    traffic_both_ways(&l, "before the crafted frames");
    let marks: [&[u8; 8]; 5] = [
        b"TLtenant",
        b"TLvni9ok",
        b"TLcrit06",
        b"TLlong06",
        b"TLunknwn",
    ];
    let inner = |mark: &[u8]| {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x99, 0x88, 0xb5]);
        f.extend_from_slice(mark);
        f.resize(60, 0);
        f
    };
    let geneve = |vni: u8, opts: &[u8], declared_words: u8| {
        let mut g = vec![declared_words & 0x3f, 0, 0x65, 0x58, 0, 0, vni, 0];
        g.extend_from_slice(opts);
        g
    };
    // 30 options of class 0x0103, type 0x10 (not critical), one data word each.
    let flood: Vec<u8> = (0..30u8)
        .flat_map(|i| [0x01, 0x03, 0x10, 1, 0, 0, 0, i])
        .collect();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sniffers: Vec<_> = [
        (l.ta.name(), "tap-n1"),
        (l.ta.name(), "tap5-n1"),
        (l.tb.name(), "tap-n2"),
        (l.tb.name(), "tap5-n2"),
    ]
    .into_iter()
    .map(|(ns, dev)| {
        let stop = stop.clone();
        let dev = dev.to_string();
        in_ns(ns, move || {
            let p = tunlab_netio::PacketSocket::open(&dev).unwrap();
            let mut seen = [0usize; 5];
            let mut buf = vec![0u8; 4096];
            loop {
                match p.recv(&mut buf) {
                    Ok(Some(n)) => {
                        for (i, m) in marks.iter().enumerate() {
                            if buf[..n].windows(8).any(|w| w == &m[..]) {
                                seen[i] += 1;
                            }
                        }
                    }
                    _ => {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
            (dev, seen)
        })
    })
    .collect();
    std::thread::sleep(Duration::from_millis(200));

    // From tenant 1: IPv4/UDP/Geneve(VNI 9)/frame, to 172.31.0.2:6081.
    in_ns(l.ta.name(), {
        let payload = [geneve(9, &flood, 60), inner(marks[0])].concat();
        move || {
            let p = tunlab_netio::PacketSocket::open("tap-n1").unwrap();
            let udp_len = 8 + payload.len();
            let mut ip = vec![
                0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0, 192, 168, 7, 1, 172, 31, 0, 2,
            ];
            let total = (20 + udp_len) as u16;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            let sum = !tunlab_wire::checksum::fold(tunlab_wire::checksum::sum(0, &ip));
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            let mut f = vec![0xff; 6];
            f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00]);
            f.extend_from_slice(&ip);
            f.extend_from_slice(&[0x30, 0x39, 0x17, 0xc1]);
            f.extend_from_slice(&(udp_len as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0]);
            f.extend_from_slice(&payload);
            for _ in 0..N {
                p.send(&f).unwrap();
            }
        }
    })
    .join()
    .unwrap();
    // On the underlay, to n1's Geneve port.
    l.hv2
        .ip(&["addr", "add", "172.31.0.99/24", "dev", &l.u2])
        .unwrap();
    in_ns(l.hv2.name(), {
        let cases = [
            (
                "172.31.0.2:0",
                [geneve(9, &flood, 60), inner(marks[1])].concat(),
            ),
            (
                "172.31.0.2:0",
                [
                    // Class 0x0103 type 0x81: critical, unknown (0x0102/0x80
                    // would be OVN's own option, which is known).
                    geneve(6, &[0x01, 0x03, 0x81, 1, 0, 0, 0, 0], 2),
                    inner(marks[2]),
                ]
                .concat(),
            ),
            (
                "172.31.0.2:0",
                [geneve(6, &[], 63), inner(marks[3])].concat(),
            ),
            (
                "172.31.0.99:0",
                [geneve(6, &[], 0), inner(marks[4])].concat(),
            ),
        ];
        move || {
            for (from, pkt) in cases {
                let s = UdpSocket::bind(from).unwrap();
                for _ in 0..N {
                    s.send_to(&pkt, "172.31.0.1:6081").unwrap();
                }
            }
        }
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen: std::collections::HashMap<String, [usize; 5]> =
        sniffers.into_iter().map(|t| t.join().unwrap()).collect();
    eprintln!(
        "crafted frames seen per tenant device (tenant, vni9, critical, long, unknown): {seen:?}"
    );
    // Tenant 1's own payload, whatever it claims inside, is delivered as
    // such to tenant 1's far side, never to tenant 2's devices.
    assert_eq!(seen["tap-n2"][0], N, "{seen:?}");
    assert_eq!(seen["tap5-n1"][0] + seen["tap5-n2"][0], 0, "{seen:?}");
    // VNI 9 from the underlay reaches tenant 2 of n1 only.
    assert!(seen["tap5-n1"][1] > 0, "{seen:?}");
    assert_eq!(
        seen["tap-n1"][1] + seen["tap-n2"][1] + seen["tap5-n2"][1],
        0,
        "{seen:?}"
    );
    // The rest reach nobody.
    for dev in ["tap-n1", "tap5-n1", "tap-n2", "tap5-n2"] {
        assert_eq!(seen[dev][2..], [0, 0, 0], "{dev}: {seen:?}");
    }
    traffic_both_ways(&l, "after the crafted frames");
    let e1 = s1.stats();
    s1.stop();
    s2.stop();
    // Each refused kind was counted, by the kernel or the slow path.
    let crit = dropped(&e1, "unknown_critical_option")
        + counter(&e1, "kernel_drop_unknown_critical_option");
    assert!(crit >= N as u64, "{e1}");
    assert!(dropped(&e1, "malformed_tunnel_header") >= N as u64, "{e1}");
    assert!(dropped(&e1, "unknown_remote") >= N as u64, "{e1}");
}

/// Open vSwitch 3.1 beside a lab, in `l`'s hv2: a userspace (netdev)
/// bridge br0 with internal ports p1 to p`ports` at those OpenFlow
/// numbers, and the `ovs-ofctl` target of its management socket.
pub fn ovs_bridge(l: &Lab, ports: u32) -> (tunlab_lab::ovs::Ovs, String) {
    let ovs = tunlab_lab::ovs::Ovs::start(l.hv2.name(), &l.dir).unwrap();
    ovs.vsctl(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
    ])
    .unwrap();
    for n in 1..=ports {
        let p = format!("p{n}");
        let req = format!("ofport_request={n}");
        ovs.vsctl(&[
            "add-port",
            "br0",
            &p,
            "--",
            "set",
            "interface",
            &p,
            "type=internal",
            &req,
        ])
        .unwrap();
    }
    let target = format!("unix:{}", l.dir.join("ovs").join("br0.mgmt").display());
    (ovs, target)
}
