//! Two tunlab nodes in network namespaces, tenants behind them:
//!
//! ```text
//!  netns ta            netns hv1                          netns hv2            netns tb
//!  192.168.7.1 ──tap── [tunlab switch] ─veth─ 172.31.0.1 ═══ 172.31.0.2 ─veth─ [tunlab switch] ──tap── 192.168.7.2
//!                       (fd00:31::1)                          (fd00:31::2)
//! ```
//!
//! For Geneve and VXLAN (and Geneve over an IPv6 underlay): UDP echo and a
//! TCP transfer with a checksum of the bytes, both directions. Isolation: a
//! node whose flows accept another VNI delivers nothing, and its counters
//! say why. Needs root; every namespace and process is removed on success
//! and failure, and a killed run's namespaces are swept by the next.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tunlab_netio::netns::{self, Netns};

static CASE: AtomicUsize = AtomicUsize::new(0);

/// A running `tunlab switch`, stopped (SIGTERM) when dropped; its stderr
/// (counters) is returned by [`Switch::stop`].
struct Switch {
    child: Option<Child>,
}

impl Switch {
    fn start(ns: &str, config: &str, dir: &std::path::Path, name: &str) -> Switch {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, config).unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                env!("CARGO_BIN_EXE_tunlab"),
                "switch",
                "--config",
            ])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tunlab switch");
        Switch { child: Some(child) }
    }

    fn stop(mut self) -> String {
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

struct Lab {
    ta: Netns,
    tb: Netns,
    hv1: Netns,
    hv2: Netns,
    /// The underlay veth end in hv2.
    u2: String,
    dir: std::path::PathBuf,
}

fn lab() -> Lab {
    let n = CASE.fetch_add(1, Ordering::SeqCst) * 4;
    let hv1 = Netns::create("tl-sw", n).expect("netns (needs root)");
    let hv2 = Netns::create("tl-sw", n + 1).unwrap();
    let ta = Netns::create("tl-sw", n + 2).unwrap();
    let tb = Netns::create("tl-sw", n + 3).unwrap();
    let u1 = format!("tlu{}a{n}", std::process::id() % 10000);
    let u2 = format!("tlu{}b{n}", std::process::id() % 10000);
    netns::run(&[
        "ip",
        "link",
        "add",
        &u1,
        "netns",
        hv1.name(),
        "type",
        "veth",
        "peer",
        "name",
        &u2,
        "netns",
        hv2.name(),
    ])
    .unwrap();
    for (ns, dev, v4, v6) in [
        (&hv1, &u1, "172.31.0.1/24", "fd00:31::1/64"),
        (&hv2, &u2, "172.31.0.2/24", "fd00:31::2/64"),
    ] {
        ns.ip(&["addr", "add", v4, "dev", dev]).unwrap();
        ns.ip(&["addr", "add", v6, "dev", dev, "nodad"]).unwrap();
        ns.ip(&["link", "set", dev, "up"]).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("tunlab-switch-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Lab {
        ta,
        tb,
        hv1,
        hv2,
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
fn node_config(
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

/// Run `f` in a thread inside namespace `ns`.
fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        netns::enter(&ns).unwrap();
        f()
    })
}

fn wait_for_tap(ns: &Netns, dev: &str) {
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

/// UDP echo from `a` to `b`: true if every one of `count` datagrams came
/// back (each tried up to `tries` times: ARP may eat the first).
fn udp_echo(a: &Netns, b: &Netns, b_ip: &str, count: u8, tries: usize) -> bool {
    let server = in_ns(b.name(), {
        let b_ip = b_ip.to_string();
        move || {
            let s = UdpSocket::bind(format!("{b_ip}:7000")).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
            let mut buf = [0u8; 2000];
            let mut n = 0;
            // Stop when the client has gone quiet.
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            while let Ok((len, from)) = s.recv_from(&mut buf) {
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
fn tcp_transfer(a: &Netns, b: &Netns, b_ip: &str) -> (u64, u64) {
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
        let b_ip = b_ip.to_string();
        move || {
            let mut c = TcpStream::connect_timeout(
                &format!("{b_ip}:7001").parse().unwrap(),
                Duration::from_secs(5),
            )
            .unwrap();
            c.write_all(&data).unwrap();
        }
    });
    client.join().unwrap();
    (sent, server.join().unwrap())
}

fn two_nodes(kind: &str, v6: bool) {
    let l = lab();
    let (a, b) = if v6 {
        ("fd00:31::1", "fd00:31::2")
    } else {
        ("172.31.0.1", "172.31.0.2")
    };
    let s1 = Switch::start(
        l.hv1.name(),
        &node_config("n1", l.ta.name(), "192.168.7.1", kind, a, b, 6, 6),
        &l.dir,
        "n1",
    );
    let s2 = Switch::start(
        l.hv2.name(),
        &node_config("n2", l.tb.name(), "192.168.7.2", kind, b, a, 6, 6),
        &l.dir,
        "n2",
    );
    wait_for_tap(&l.ta, "tap-n1");
    wait_for_tap(&l.tb, "tap-n2");
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6),
        "{kind}: UDP a->b"
    );
    assert!(
        udp_echo(&l.tb, &l.ta, "192.168.7.1", 10, 6),
        "{kind}: UDP b->a"
    );
    let (s, r) = tcp_transfer(&l.ta, &l.tb, "192.168.7.2");
    assert_eq!(s, r, "{kind}: TCP a->b bytes differ");
    let (s, r) = tcp_transfer(&l.tb, &l.ta, "192.168.7.1");
    assert_eq!(s, r, "{kind}: TCP b->a bytes differ");
    let e1 = s1.stop();
    let e2 = s2.stop();
    assert!(e1.contains("port 10 t-n1 ("), "{e1}");
    assert!(e2.contains("rx "), "{e2}");
}

#[test]
fn geneve_ipv4_underlay() {
    two_nodes("geneve", false);
}

#[test]
fn vxlan_ipv4_underlay() {
    two_nodes("vxlan", false);
}

#[test]
fn geneve_ipv6_underlay() {
    two_nodes("geneve", true);
}

#[test]
fn wrong_vni_is_dropped_and_counted() {
    let l = lab();
    // n2 accepts only VNI 7; n1 sends 6.
    let s1 = Switch::start(
        l.hv1.name(),
        &node_config(
            "n1",
            l.ta.name(),
            "192.168.7.1",
            "geneve",
            "172.31.0.1",
            "172.31.0.2",
            6,
            6,
        ),
        &l.dir,
        "n1",
    );
    let s2 = Switch::start(
        l.hv2.name(),
        &node_config(
            "n2",
            l.tb.name(),
            "192.168.7.2",
            "geneve",
            "172.31.0.2",
            "172.31.0.1",
            7,
            7,
        ),
        &l.dir,
        "n2",
    );
    wait_for_tap(&l.ta, "tap-n1");
    wait_for_tap(&l.tb, "tap-n2");
    assert!(!udp_echo(&l.ta, &l.tb, "192.168.7.2", 1, 4));
    let _ = s1.stop();
    let e2 = s2.stop();
    assert!(e2.contains("dropped no_rule: "), "{e2}");
    // Nothing reached the tenant (it may send its own neighbour discovery).
    assert!(
        e2.contains("port 1 tap-n2 (tap): rx ") && e2.contains(", tx 0 pkts 0 bytes"),
        "{e2}"
    );
}

/// Insert `control_socket = PATH` into a node config's `[switch]` table.
fn with_ctl(cfg: &str, path: &std::path::Path) -> String {
    cfg.replacen(
        "[switch]\n",
        &format!("[switch]\ncontrol_socket = \"{}\"\n", path.display()),
        1,
    )
}

fn ctl(sock: &std::path::Path, req: &[&str]) -> (bool, String, String) {
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

#[test]
fn flows_change_at_run_time_through_ctl() {
    let l = lab();
    let c1 = l.dir.join("n1.ctl");
    // n1 starts with no flows at all; n2 is complete.
    let n1 = node_config(
        "n1",
        l.ta.name(),
        "192.168.7.1",
        "vxlan",
        "172.31.0.1",
        "172.31.0.2",
        6,
        6,
    );
    let n1 = with_ctl(&n1, &c1).replace(
        "  \"in_port=1 actions=output:10\",\n  \"in_port=10,tun_id=6 actions=output:1\",\n",
        "",
    );
    let s1 = Switch::start(l.hv1.name(), &n1, &l.dir, "n1");
    let s2 = Switch::start(
        l.hv2.name(),
        &with_ctl(
            &node_config(
                "n2",
                l.tb.name(),
                "192.168.7.2",
                "vxlan",
                "172.31.0.2",
                "172.31.0.1",
                6,
                6,
            ),
            &l.dir.join("n2.ctl"),
        ),
        &l.dir,
        "n2",
    );
    wait_for_tap(&l.ta, "tap-n1");
    wait_for_tap(&l.tb, "tap-n2");
    assert!(
        !udp_echo(&l.ta, &l.tb, "192.168.7.2", 1, 2),
        "no flows: nothing may pass"
    );

    let (ok, out, _) = ctl(&c1, &["show"]);
    assert!(
        ok && out.contains(" 1(tap-n1): tap") && out.contains(" 10(t-n1): vxlan"),
        "{out}"
    );
    let (ok, _, err) = ctl(
        &c1,
        &["add-flow", "in_port=tap-n1,dl_vlan=5000 actions=output:10"],
    );
    assert!(
        !ok && err.contains("dl_vlan: 5000 is out of range") && err.contains("^^^^"),
        "{err}"
    );
    assert_eq!(
        ctl(&c1, &["dump-flows"]).1,
        "",
        "a refused rule must leave no trace"
    );
    assert!(ctl(&c1, &["add-flow", "in_port=tap-n1 actions=output:t-n1"]).0);
    assert!(ctl(&c1, &["add-flow", "in_port=10,tun_id=6 actions=output:1"]).0);
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 5, 6),
        "flows added at run time must carry traffic"
    );
    let (_, dump, _) = ctl(&c1, &["dump-flows"]);
    assert!(
        dump.contains("in_port=tap-n1 actions=output:t-n1"),
        "{dump}"
    );
    assert!(
        !dump.contains("n_packets=0,"),
        "both rules were used: {dump}"
    );
    let (ok, out, _) = ctl(&c1, &["del-flows", "in_port=tap-n1"]);
    assert!(ok && out.contains("deleted 1 rules"), "{out}");
    assert!(
        !udp_echo(&l.ta, &l.tb, "192.168.7.2", 1, 2),
        "deleted rule must stop traffic"
    );
    let (_, stats, _) = ctl(&c1, &["stats"]);
    assert!(
        stats.contains("dropped no_rule: ") && stats.contains("exact-match cache: "),
        "{stats}"
    );
    let (ok, _, err) = ctl(&c1, &["frobnicate"]);
    assert!(!ok && err.contains("unknown request 'frobnicate'"), "{err}");
    s1.stop();
    s2.stop();
    assert!(!c1.exists(), "the control socket is removed on exit");
}

/// Interop with the Linux kernel's VXLAN device:
///
/// ```text
///  ta 192.168.7.1 ─tap─ [tunlab switch, hv1] ═ VXLAN 6 ═ [hv2: vxlan0 ─ br0 ─ veth] ─ tb 192.168.7.2
/// ```
#[test]
fn interop_with_kernel_vxlan() {
    let l = lab();
    let u2 = l.u2.clone();
    let s1 = Switch::start(
        l.hv1.name(),
        &node_config(
            "n1",
            l.ta.name(),
            "192.168.7.1",
            "vxlan",
            "172.31.0.1",
            "172.31.0.2",
            6,
            6,
        ),
        &l.dir,
        "n1",
    );
    // hv2: the kernel's VXLAN, bridged to a veth whose other end is tb's.
    let hv2 = l.hv2.name();
    l.hv2
        .ip(&[
            "link",
            "add",
            "vxlan0",
            "type",
            "vxlan",
            "id",
            "6",
            "local",
            "172.31.0.2",
            "remote",
            "172.31.0.1",
            "dstport",
            "4789",
            "dev",
            &u2,
        ])
        .unwrap();
    l.hv2.ip(&["link", "add", "br0", "type", "bridge"]).unwrap();
    l.hv2
        .ip(&["link", "set", "vxlan0", "master", "br0"])
        .unwrap();
    netns::run(&[
        "ip",
        "-n",
        hv2,
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
    l.hv2.ip(&["link", "set", "tbh", "master", "br0"]).unwrap();
    for dev in ["vxlan0", "br0", "tbh"] {
        l.hv2.ip(&["link", "set", dev, "up"]).unwrap();
    }
    l.tb.ip(&["link", "set", "tbe", "mtu", "1450"]).unwrap();
    l.tb.ip(&["addr", "add", "192.168.7.2/24", "dev", "tbe"])
        .unwrap();
    l.tb.ip(&["link", "set", "tbe", "up"]).unwrap();
    wait_for_tap(&l.ta, "tap-n1");
    if !udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6) {
        let k = l
            .hv2
            .ip(&["-s", "link", "show", "vxlan0"])
            .unwrap_or_default();
        let fdb =
            netns::run(&["bridge", "-n", hv2, "fdb", "show", "dev", "vxlan0"]).unwrap_or_default();
        let t = l.tb.ip(&["-s", "link", "show", "tbe"]).unwrap_or_default();
        panic!(
            "UDP tunlab -> kernel VXLAN\nswitch:\n{}\nvxlan0:\n{k}\nfdb:\n{fdb}\ntbe:\n{t}",
            s1.stop()
        );
    }
    assert!(
        udp_echo(&l.tb, &l.ta, "192.168.7.1", 10, 6),
        "UDP kernel VXLAN -> tunlab"
    );
    let (s, r) = tcp_transfer(&l.ta, &l.tb, "192.168.7.2");
    assert_eq!(s, r, "TCP tunlab -> kernel VXLAN");
    let (s, r) = tcp_transfer(&l.tb, &l.ta, "192.168.7.1");
    assert_eq!(s, r, "TCP kernel VXLAN -> tunlab");
    let e1 = s1.stop();
    assert!(!e1.contains("dropped malformed"), "{e1}");
}
