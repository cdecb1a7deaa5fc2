//! The Debian package, as an operator meets it: built by
//! `scripts/package`, installed with `dpkg -i`, a node started by the
//! unit's own ExecStart the way systemd would (this machine kind runs no
//! systemd: see docs/operations.md), checked (ready, `tunlab ctl show`,
//! metrics, reload), stopped; a kernel-datapath node stopped and started
//! again keeping its datapath (the unit's --keep-datapath); then purged,
//! leaving nothing behind. Needs root and dpkg; runs alone (it installs
//! into /usr and /etc).

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", args[0]));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn installed() -> bool {
    run(&["dpkg-query", "-W", "-f=${Status}", "tunlab"])
        .1
        .contains("install ok installed")
}

/// Whatever the test installed or made goes, should it fail midway.
struct Cleanup {
    config: PathBuf,
    node: Option<std::process::Child>,
    /// The kernel-datapath node's file and its tenant's namespace.
    kernel_config: Option<PathBuf>,
    netns: Option<String>,
    /// The test's node mounted the host's bpffs: unmount it at the end.
    unmount_bpffs: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(mut n) = self.node.take() {
            let _ = n.kill();
            let _ = n.wait();
        }
        let _ = std::fs::remove_file(&self.config);
        // The package's prerm removes a kept datapath while its file is
        // there.
        if installed() {
            let _ = run(&["dpkg", "--purge", "tunlab"]);
        }
        if let Some(k) = &self.kernel_config {
            let _ = std::fs::remove_file(k);
            let _ = std::fs::remove_dir("/etc/tunlab");
        }
        if let Some(ns) = &self.netns {
            let _ = run(&["ip", "netns", "del", ns]);
        }
        if self.unmount_bpffs && bpffs_mounted() {
            let _ = run(&["umount", "/sys/fs/bpf"]);
        }
    }
}

/// Whether the host's /sys/fs/bpf is a bpffs.
fn bpffs_mounted() -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .is_ok_and(|m| m.lines().any(|l| l.contains(" /sys/fs/bpf bpf ")))
}

/// Whether node `name` has pins on the host's bpffs
/// (`/sys/fs/bpf/tunlab/netns-COOKIE/NAME`).
fn pinned(name: &str) -> bool {
    std::fs::read_dir("/sys/fs/bpf/tunlab")
        .map(|d| d.flatten().any(|ns| ns.path().join(name).is_dir()))
        .unwrap_or(false)
}

/// A `Key=` line of the unit file (the first).
fn unit_value<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
}

/// The unit's ExecStart as systemd runs it for instance `node`: %i filled
/// in, the bounding set and no-new-privileges, a private mount namespace
/// (ProtectHome makes one), readiness on $NOTIFY_SOCKET at `notify`, and
/// journald's stream named (the switch then starts each line with its
/// priority).
fn exec_start(unit: &str, node: &str, notify: &Path) -> Command {
    let exec = unit_value(unit, "ExecStart").replace("%i", node);
    let caps: Vec<String> = unit_value(unit, "CapabilityBoundingSet")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "slave", "setpriv"])
        .arg(format!("--bounding-set=-all,{}", caps.join(",")))
        .args(["--no-new-privs", "--"])
        .args(exec.split_whitespace())
        .env("NOTIFY_SOCKET", notify)
        .env("JOURNAL_STREAM", "0:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// SIGTERM (`systemctl stop`), STOPPING=1 and a clean exit; the node's
/// log.
fn stop(notify: &UnixDatagram, child: &mut std::process::Child) -> String {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    wait_for(notify, "STOPPING=1", child);
    let mut log = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut log).unwrap();
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "the node exited with {status}: {log}");
    log
}

/// Wait for a datagram on the notify socket that holds `what`.
fn wait_for(sock: &UnixDatagram, what: &str, node: &mut std::process::Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 512];
    while Instant::now() < deadline {
        if let Ok(n) = sock.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            if msg.contains(what) {
                return msg;
            }
        }
        if let Ok(Some(status)) = node.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = node.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("the node exited ({status}) before {what}: {err}");
        }
    }
    panic!("no {what} from the node in 20 s");
}

#[test]
fn the_package_installs_runs_a_node_and_purges_clean() {
    assert!(
        !installed(),
        "a tunlab package is already installed: this test needs a machine without it"
    );
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let node = format!("tlpkg{}", std::process::id());
    let config = PathBuf::from(format!("/etc/tunlab/{node}.toml"));
    let mut cleanup = Cleanup {
        config: config.clone(),
        node: None,
        kernel_config: None,
        netns: None,
        unmount_bpffs: !bpffs_mounted(),
    };
    let (ok, out) = run(&[
        repo.join("scripts/package").to_str().unwrap(),
        "--binary",
        env!("CARGO_BIN_EXE_tunlab"),
    ]);
    assert!(ok, "scripts/package: {out}");
    let deb = repo.join(out.lines().last().unwrap().trim());
    let (ok, out) = run(&["dpkg", "-i", deb.to_str().unwrap()]);
    assert!(ok, "dpkg -i: {out}");
    for f in [
        "/usr/bin/tunlab",
        "/lib/systemd/system/tunlab-switch@.service",
        "/etc/tunlab/demo.toml",
        "/usr/share/man/man1/tunlab.1.gz",
        "/usr/share/man/man1/tunlab-switch.1.gz",
        "/usr/share/man/man1/tunlab-ctl.1.gz",
        "/usr/share/man/man1/tunlab-bench.1.gz",
        "/usr/share/man/man1/tunlab-gen.1.gz",
        "/usr/share/man/man1/tunlab-decode.1.gz",
        "/usr/share/bash-completion/completions/tunlab",
        "/usr/share/zsh/vendor-completions/_tunlab",
        "/usr/share/fish/vendor_completions.d/tunlab.fish",
    ] {
        assert!(Path::new(f).exists(), "{f} not installed");
    }
    // The man page says what --help says.
    let (ok, page) = run(&["sh", "-c", "zcat /usr/share/man/man1/tunlab-switch.1.gz"]);
    assert!(ok && page.contains("Run one overlay node"), "{page}");
    let unit = std::fs::read_to_string("/lib/systemd/system/tunlab-switch@.service").unwrap();
    // Without a running systemd, verify still reads the unit, its
    // commands and its man pages; it exits 0 either way, so what it says
    // is the verdict (the man pages are checked where `man` is installed).
    let (_, out) = run(&[
        "systemd-analyze",
        "verify",
        &format!("/lib/systemd/system/tunlab-switch@{node}.service"),
    ]);
    let no_man = !run(&["sh", "-c", "command -v man"]).0;
    let complaints: Vec<&str> = out
        .lines()
        .filter(|l| !(l.trim().is_empty() || no_man && l.contains("Command 'man ")))
        .collect();
    assert!(complaints.is_empty(), "systemd-analyze verify: {out}");
    assert_eq!(unit_value(&unit, "Type"), "notify");
    assert_eq!(unit_value(&unit, "Restart"), "on-failure");

    // An operator's node: the example, under its own name.
    let demo = std::fs::read_to_string("/etc/tunlab/demo.toml").unwrap();
    let port = 20000 + std::process::id() % 20000;
    let mine = demo
        .replace("name = \"demo\"", &format!("name = \"{node}\""))
        .replace("tap-demo", &format!("tap-{node}"))
        .replace(
            "# metrics = \"127.0.0.1:9476\"",
            &format!("metrics = \"127.0.0.1:{port}\""),
        );
    assert_ne!(mine, demo);
    std::fs::write(&config, mine).unwrap();

    let notify_path = std::env::temp_dir().join(format!("{node}.notify"));
    let _ = std::fs::remove_file(&notify_path);
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut cmd = exec_start(&unit, &node, &notify_path);
    let child = cleanup.node.insert(cmd.spawn().unwrap());
    let ready = wait_for(&notify, "READY=1", child);
    assert!(ready.contains(&format!("node {node} running")), "{ready}");

    let (ok, show) = run(&["/usr/bin/tunlab", "ctl", "--node", &node, "show"]);
    assert!(
        ok && show.contains(&format!("tap-{node}")),
        "ctl show: {show}"
    );
    let script = format!(
        "import urllib.request\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families as p\n\
         t = urllib.request.urlopen('http://127.0.0.1:{port}/metrics', timeout=5).read().decode()\n\
         print(sorted(f.name for f in p(t)))"
    );
    let (ok, families) = run(&["python3", "-c", &script]);
    assert!(
        ok && families.contains("tunlab_port_receive_packets"),
        "metrics: {families}"
    );

    // systemctl reload: ExecReload with $MAINPID filled in, then
    // RELOADING=1 and READY=1 from the switch.
    let reload = unit_value(&unit, "ExecReload").replace("$MAINPID", &child.id().to_string());
    let argv: Vec<&str> = reload.split_whitespace().collect();
    let (ok, out) = run(&argv);
    assert!(ok, "{reload}: {out}");
    wait_for(&notify, "RELOADING=1", child);
    wait_for(&notify, "READY=1", child);

    // systemctl stop: SIGTERM, STOPPING=1, a normal exit.
    let log = stop(&notify, child);
    cleanup.node = None;
    // One line per event, each with its priority and its event's name,
    // the start's and the stop's among them.
    for line in log.lines() {
        let prio = line.strip_prefix('<').and_then(|l| l.split_once('>'));
        assert!(
            prio.is_some_and(|(p, _)| ["3", "4", "6", "7"].contains(&p))
                && line.contains(" event="),
            "not a journald line: {line:?}"
        );
    }
    for event in [
        "event=node_running",
        "event=config_reloaded",
        "event=node_stopped",
    ] {
        assert!(log.contains(event), "no {event} in: {log}");
    }

    // A node on the kernel datapath (a veth port): the unit's stop keeps
    // its datapath (ExecStart has --keep-datapath), so `systemctl
    // restart` keeps its tenants' connections; the next start adopts it,
    // and removing the package removes what the last stop kept.
    let knode = format!("{node}k");
    let tenant = format!("{node}t");
    let veth = format!("tlk{}", std::process::id() % 100_000);
    let (ok, out) = run(&["ip", "netns", "add", &tenant]);
    assert!(ok, "ip netns add: {out}");
    cleanup.netns = Some(tenant.clone());
    let kconfig = PathBuf::from(format!("/etc/tunlab/{knode}.toml"));
    cleanup.kernel_config = Some(kconfig.clone());
    std::fs::write(
        &kconfig,
        format!(
            "[switch]\nname = \"{knode}\"\nflows = [\"priority=0 actions=drop\"]\n\n\
             [[port]]\nname = \"{veth}\"\nofport = 1\ntype = \"veth\"\nnetns = \"{tenant}\"\naddress = \"192.168.77.1/24\"\n"
        ),
    )
    .unwrap();
    let mut logs = Vec::new();
    for start in 0..2 {
        let child = cleanup
            .node
            .insert(exec_start(&unit, &knode, &notify_path).spawn().unwrap());
        wait_for(&notify, "READY=1", child);
        let log = stop(&notify, child);
        cleanup.node = None;
        assert!(log.contains("event=datapath_kept"), "stop {start}: {log}");
        assert!(pinned(&knode), "stop {start} kept no pins: {log}");
        assert!(
            Path::new(&format!("/sys/class/net/{veth}")).exists(),
            "stop {start} took the veth port: {log}"
        );
        logs.push(log);
    }
    assert!(
        logs[1].contains("adopting the kernel datapath pinned at"),
        "the second start did not adopt: {}",
        logs[1]
    );
    let _ = std::fs::remove_file(&notify_path);

    std::fs::remove_file(&config).unwrap();
    let (ok, out) = run(&["dpkg", "--purge", "tunlab"]);
    assert!(ok, "dpkg --purge: {out}");
    // The prerm removed the kept datapath; dpkg leaves the operator's own
    // file, as it leaves any file it did not install.
    assert!(!pinned(&knode), "the kept datapath's pins are left");
    assert!(
        !Path::new(&format!("/sys/class/net/{veth}")).exists(),
        "the kept veth port is left"
    );
    let left: Vec<_> = std::fs::read_dir("/etc/tunlab")
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, [kconfig.file_name().unwrap()]);
    std::fs::remove_file(&kconfig).unwrap();
    std::fs::remove_dir("/etc/tunlab").unwrap();
    for gone in [
        "/usr/bin/tunlab".to_string(),
        "/etc/tunlab".to_string(),
        "/lib/systemd/system/tunlab-switch@.service".to_string(),
        format!("/run/tunlab/{node}.ctl"),
        format!("/run/tunlab/{node}.mgmt"),
        format!("/sys/class/net/tap-{node}"),
    ] {
        assert!(!Path::new(&gone).exists(), "{gone} left behind");
    }
    let (_, procs) = run(&["pgrep", "-f", &format!("/etc/tunlab/{node}.toml")]);
    assert!(procs.trim().is_empty(), "a node process left: {procs}");
}
