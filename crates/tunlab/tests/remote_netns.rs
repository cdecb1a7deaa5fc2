//! `tunlab bench --hosts ...` (issue 18) against real OpenSSH servers
//! (Debian's `openssh-server`), each in a namespace of the test (a "host")
//! with its own host key, taking only a key this test makes, and listening
//! only on that namespace's underlay address. The check finds each host's
//! underlay interface and tools, and a wrong address, a refused connection
//! and a missing tool each get a clear error; a run over SSH agrees with
//! the same variants run here; a connection cut mid-run stops the run,
//! which still writes what it measured, and `--cleanup` removes what was
//! left. Needs root (namespaces) and openssh-server (scripts/install-deps).
//!
//! The tests run one at a time: the "hosts" share this machine's
//! namespace list and /tmp, where `--cleanup` removes every run's leftovers.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The tunlab under test: this build's, or `TUNLAB_BIN` (e.g. a release
/// build, for figures worth quoting: the test build is unoptimized).
fn tunlab_bin() -> String {
    std::env::var("TUNLAB_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tunlab").to_string())
}

/// An sshd in a namespace, stopped on drop.
struct Sshd(Child);

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// sshd refuses to start without its privilege-separation directory,
/// which the package's service would make; made (and removed again) here.
struct PrivsepDir(bool);

impl PrivsepDir {
    fn ensure() -> PrivsepDir {
        let d = Path::new("/run/sshd");
        let made = !d.exists() && std::fs::create_dir_all(d).is_ok();
        PrivsepDir(made)
    }
}

impl Drop for PrivsepDir {
    fn drop(&mut self) {
        if self.0 {
            let _ = std::fs::remove_dir("/run/sshd");
        }
    }
}

fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen (openssh-client)")
        .success();
    assert!(ok, "ssh-keygen {}", path.display());
}

/// Start sshd in `ns` on `addr:port`; `env` is set in its sessions.
fn sshd(ns: &str, addr: &str, port: u16, dir: &Path, env: Option<&str>) -> Sshd {
    let key = dir.join(format!("host-{ns}-{port}"));
    // A server started again keeps its host key.
    if !key.exists() {
        keygen(&key);
    }
    let cfg = dir.join(format!("sshd-{ns}-{port}.conf"));
    let mut text = format!(
        "ListenAddress {addr}\nPort {port}\nHostKey {}\nPidFile {}\nAuthorizedKeysFile {}\n\
         PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
         PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n",
        key.display(),
        dir.join(format!("sshd-{ns}-{port}.pid")).display(),
        dir.join("authorized_keys").display()
    );
    if let Some(e) = env {
        text.push_str(&format!("SetEnv {e}\n"));
    }
    std::fs::write(&cfg, text).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", ns, "/usr/sbin/sshd", "-D", "-e", "-f"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("/usr/sbin/sshd (scripts/install-deps installs openssh-server)");
    Sshd(child)
}

/// `tunlab bench ARGS` run in `ns`: success, stdout, stderr.
fn bench(ns: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, &tunlab_bin(), "bench"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whatever a failed test left on the "hosts" (this machine) goes when
/// the test ends, passed or not: namespaces and work folders named as the
/// lab names them on remote hosts, and processes started from those
/// folders. (Links live in the lab's namespaces and go with them.)
struct Tidy;

impl Drop for Tidy {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .args([
                "-c",
                "pkill -KILL -f '/tmp/tl[r][0-9]'; for n in $(ip netns list | awk '{print $1}' | grep '^tlr[0-9]'); do ip netns pids $n | xargs -r kill -KILL; ip netns del $n; done; rm -rf /tmp/tlr[0-9]*",
            ])
            .status();
    }
}

/// What every test here starts from: its turn, the lab's namespaces (hv1
/// and hv2 are the "hosts"), sshd's privilege-separation folder, and the
/// client key with its ssh config; leftovers removed at the end.
struct Fixture {
    lab: Lab,
    cfg: String,
    _privsep: PrivsepDir,
    _tidy: Tidy,
    _one: std::sync::MutexGuard<'static, ()>,
}

fn fixture() -> Fixture {
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let cfg = client(&lab.dir);
    Fixture {
        lab,
        cfg,
        _privsep: PrivsepDir::ensure(),
        _tidy: Tidy,
        _one: one,
    }
}

/// The test's client key and the ssh config that uses it.
fn client(dir: &Path) -> String {
    let id = dir.join("id");
    keygen(&id);
    std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).unwrap();
    let cfg = dir.join("ssh_config");
    std::fs::write(
        &cfg,
        format!(
            "Host *\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n",
            id.display()
        ),
    )
    .unwrap();
    cfg.display().to_string()
}

/// Wait until `ssh` reaches `dest` (a server takes a moment to listen).
fn wait_for_ssh(ns: &str, cfg: &str, dest: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ok = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "ssh",
                "-F",
                cfg,
                "-o",
                "BatchMode=yes",
                dest,
                "true",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
        assert!(Instant::now() < deadline, "{dest}: sshd never answered");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the lab made on the hosts and did not remove: namespaces, links in
/// either host namespace, processes started from a work folder, the work
/// folders themselves.
fn leftovers(l: &Lab) -> Vec<String> {
    let mut found = Vec::new();
    let list = |args: &[&str]| {
        String::from_utf8_lossy(
            &Command::new(args[0])
                .args(&args[1..])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned()
    };
    for n in list(&["ip", "netns", "list"]).lines() {
        if n.starts_with("tlr") {
            found.push(format!("namespace {n}"));
        }
    }
    for ns in [l.hv1.name(), l.hv2.name()] {
        for line in list(&["ip", "-n", ns, "-o", "link", "show"]).lines() {
            if let Some(name) = line.split(": ").nth(1).filter(|n| n.starts_with("tlr")) {
                found.push(format!("link {name} in {ns}"));
            }
        }
    }
    for p in list(&["pgrep", "-af", "/tmp/tl[r][0-9]"]).lines() {
        found.push(format!("process {p}"));
    }
    for e in std::fs::read_dir("/tmp").unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with("tlr") && n[3..].starts_with(|c: char| c.is_ascii_digit()) {
            found.push(format!("folder /tmp/{n}"));
        }
    }
    found
}

#[test]
fn hosts_are_checked_over_ssh_and_what_is_wrong_is_named() {
    let f = fixture();
    let (l, dir, cfg) = (&f.lab, f.lab.dir.clone(), f.cfg.clone());
    let _a = sshd(l.hv1.name(), "172.31.0.1", 22, &dir, None);
    let _b = sshd(l.hv2.name(), "172.31.0.2", 22, &dir, None);
    // A host whose sessions find only /usr/bin and /bin: the tools in
    // /usr/sbin are missing there.
    let _c = sshd(
        l.hv2.name(),
        "172.31.0.2",
        2223,
        &dir,
        Some("PATH=/usr/bin:/bin"),
    );
    let check = |hosts: &str, underlay: &str| {
        bench(
            l.hv1.name(),
            &[
                "--hosts",
                hosts,
                "--underlay",
                underlay,
                "--ssh-config",
                &cfg,
                "--check",
            ],
        )
    };

    // Both hosts answer (the servers take a moment to listen).
    let deadline = Instant::now() + Duration::from_secs(10);
    let (ok, out, err) = loop {
        let r = check("172.31.0.1,172.31.0.2", "172.31.0.1,172.31.0.2");
        if r.0 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(ok, "{out}\n{err}");
    eprintln!("{out}");
    let kernel =
        String::from_utf8(Command::new("uname").arg("-r").output().unwrap().stdout).unwrap();
    for (host, dev) in [("172.31.0.1", &l.u1), ("172.31.0.2", &l.u2)] {
        let row = out
            .lines()
            .find(|r| r.starts_with(host))
            .unwrap_or_else(|| panic!("{host} not in:\n{out}"));
        // The veth's driver and MTU, and no NUMA node (a virtual device).
        assert!(
            row.contains(dev.as_str())
                && row.contains(kernel.trim())
                && row.contains(" veth ")
                && row.contains(" 1500 ")
                && row.contains(" -1 "),
            "{row}"
        );
        assert!(row.contains("not found (would be copied)"), "{row}");
    }

    // The underlay address on neither of the second host's interfaces.
    let (ok, _, err) = check("172.31.0.1,172.31.0.2", "172.31.0.1,172.31.0.9");
    assert!(!ok, "{err}");
    assert!(
        err.contains("172.31.0.2: the underlay address 172.31.0.9 is on none of its interfaces")
            && err.contains(&format!("172.31.0.2 on {}", l.u2)),
        "{err}"
    );
    // No server on that port.
    let (ok, _, err) = check("172.31.0.1,ssh://172.31.0.2:2222", "172.31.0.1,172.31.0.2");
    assert!(
        !ok && err.contains("ssh://172.31.0.2:2222: SSH failed"),
        "{err}"
    );
    assert!(err.contains("refused"), "{err}");
    // A host without the tools in /usr/sbin: each named with its package.
    let (ok, out, _) = check("172.31.0.1,ssh://172.31.0.2:2223", "172.31.0.1,172.31.0.2");
    assert!(!ok, "{out}");
    assert!(
        out.contains(
            "ssh://172.31.0.2:2223: ovs-vswitchd missing: apt-get install openvswitch-switch"
        ),
        "{out}"
    );
    // Bad arguments are named before anything is tried.
    let (ok, _, err) = bench(
        l.hv1.name(),
        &["--hosts", "a,b", "--underlay", "172.31.0.1,nope", "--check"],
    );
    assert!(
        !ok && err.contains("'nope' (for b) is not an IP address"),
        "{err}"
    );
    let (ok, _, err) = bench(
        l.hv1.name(),
        &["--hosts", "a", "--underlay", "172.31.0.1", "--check"],
    );
    assert!(!ok && err.contains("two hosts"), "{err}");
    let (ok, _, err) = bench(
        l.hv1.name(),
        &[
            "--hosts",
            "a,b",
            "--underlay",
            "10.0.0.1,10.0.0.2",
            "--ssh-config",
            "/nonexistent/ssh_config",
        ],
    );
    assert!(
        !ok && err.contains("--ssh-config: /nonexistent/ssh_config: no such file"),
        "{err}"
    );
    assert_eq!(leftovers(l), Vec::<String>::new());
}

/// `tunlab compare A B`'s table.
fn compare(a: &Path, b: &Path) -> String {
    let out = Command::new(tunlab_bin())
        .arg("compare")
        .arg(a)
        .arg(b)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The agreement test's tests: a stream and request/response (the 16 KB
/// stream measures nothing over SSH that the 64 KB one does not), five
/// rounds each side: enough that two intervals which do not overlap say
/// the runs differ, without the whole quick profile's five minutes twice.
const TWO_TESTS: &str = "tcp_stream-65536B-1i,tcp_rr-64B-1i";

/// The variants whose ratio to kernel VXLAN is the same datapath over SSH
/// and here. Two cannot be: `none` is a macvlan on real hosts, whose NICs
/// the lab does not take, and a bridge here; Open vSwitch's underlay is a
/// macvlan there and the veth here.
const COMPARABLE: [&str; 5] = [
    "tunlab-ebpf-geneve-ovn",
    "tunlab-ebpf-vxlan",
    "tunlab-ebpf-qinq",
    "tunlab-stt",
    "tunlab-geneve-ovn",
];

/// `tunlab bench` over the two SSH "hosts" (every variant, unless
/// `variants` narrows it), then the comparable ones of it here, each into
/// its own folder under `dir`.
fn both_ways(
    f: &Fixture,
    tag: &str,
    tests: &str,
    variants: Option<&str>,
    rounds: &str,
) -> (PathBuf, PathBuf) {
    let (l, dir) = (&f.lab, &f.lab.dir);
    let over_ssh = dir.join(format!("over-ssh-{tag}"));
    let here = dir.join(format!("here-{tag}"));
    let over_ssh_s = over_ssh.display().to_string();
    let mut args = vec![
        "--hosts",
        "172.31.0.1,172.31.0.2",
        "--underlay",
        "172.31.0.1,172.31.0.2",
        "--ovs-underlay",
        "172.31.0.11,172.31.0.12",
        "--ssh-config",
        &f.cfg,
        "--tests",
        tests,
        "--rounds",
        rounds,
        "--out",
        &over_ssh_s,
    ];
    if let Some(v) = variants {
        args.extend(["--variants", v]);
    }
    let (ok, out, err) = bench(l.hv1.name(), &args);
    eprintln!("{out}\n{err}");
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("172.31.0.1 ({} 172.31.0.1)", l.u1)),
        "{out}"
    );
    assert!(
        out.contains("CPU on each host: 172.31.0.1 | 172.31.0.2"),
        "{out}"
    );
    assert_eq!(leftovers(l), Vec::<String>::new());

    // Here, only what is compared: the two variants that cannot be the
    // same datapath here (see COMPARABLE) would cost a quarter of the run.
    let comparable = format!("kernel-vxlan,{}", COMPARABLE.join(","));
    let here_variants = variants.unwrap_or(&comparable);
    let here_args = [
        "bench",
        "--tests",
        tests,
        "--rounds",
        rounds,
        "--variants",
        here_variants,
    ];
    let out = Command::new(tunlab_bin())
        .args(here_args)
        .arg("--out")
        .arg(&here)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    (over_ssh, here)
}

/// A variant's ratio to kernel VXLAN in one test: its 95 % interval.
fn ratio(r: &serde_json::Value, v: &str, t: &str) -> (f64, f64) {
    let x = r["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["variant"] == v)
        .and_then(|x| {
            x["tests"]
                .as_array()
                .unwrap()
                .iter()
                .find(|y| y["test"] == t)
        })
        .map(|y| y["ratio"].clone())
        .unwrap_or_default();
    let end = |k: &str| x[k].as_f64().unwrap_or_else(|| panic!("{v} {t}: no ratio"));
    (end("lo"), end("hi"))
}

/// The (variant, test) rows among `rows` whose ratio intervals over SSH
/// and here do not overlap.
fn apart(over_ssh: &Path, here: &Path, rows: &[(String, String)]) -> Vec<(String, String)> {
    let (a, b) = (
        json(&over_ssh.join("results.json")),
        json(&here.join("results.json")),
    );
    let mut out = Vec::new();
    for (v, t) in rows {
        let (x, y) = (ratio(&a, v, t), ratio(&b, v, t));
        eprintln!("{v} {t}: over SSH {x:.3?}, here {y:.3?}");
        if x.1 < y.0 || y.1 < x.0 {
            out.push((v.clone(), t.clone()));
        }
    }
    out
}

#[test]
fn the_quick_profile_over_ssh_agrees_with_the_same_run_here() {
    let f = fixture();
    let (l, dir, cfg) = (&f.lab, f.lab.dir.clone(), f.cfg.clone());
    let _a = sshd(l.hv1.name(), "172.31.0.1", 22, &dir, None);
    let _b = sshd(l.hv2.name(), "172.31.0.2", 22, &dir, None);
    wait_for_ssh(l.hv1.name(), &cfg, "172.31.0.1");
    wait_for_ssh(l.hv1.name(), &cfg, "172.31.0.2");
    let (over_ssh, here) = both_ways(&f, "1", TWO_TESTS, None, "5");

    let r = json(&over_ssh.join("results.json"));
    // Each host's environment, and each sample's CPU per host.
    let hosts = r["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2);
    assert_eq!(hosts[1]["underlay_dev"], l.u2.as_str());
    assert_eq!(hosts[1]["driver"], "veth");
    let variants = r["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 8, "the quick profile's eight variants");
    for v in variants {
        assert_eq!(v["status"], "ok", "{v}");
        for t in v["tests"].as_array().unwrap() {
            assert!(t["error"].is_null(), "{t}");
            for s in t["samples"].as_array().unwrap() {
                let each = s["hosts_cpu"].as_array().unwrap();
                assert_eq!(each.len(), 2, "{s}");
                assert!(each[0]["usage"]["system_busy_s"].as_f64().unwrap() > 0.0);
            }
        }
    }
    let table = compare(&over_ssh.join("results.json"), &here.join("results.json"));
    eprintln!("{table}");
    assert!(!table.contains("FAILED"), "{table}");
    let compared = table
        .lines()
        .filter(|l| COMPARABLE.iter().any(|v| l.starts_with(&format!("{v} "))))
        .filter(|l| l.contains("within noise") || l.contains("CHANGED"))
        .count();
    assert_eq!(compared, 10, "{table}");

    // What the lab claims is each variant's ratio to kernel VXLAN, and
    // that is what must agree. Absolute figures of two runs a quarter of
    // an hour apart drift together on this machine (in one run here every
    // kernel path read 5-16 % lower in the second, and Welch's test called
    // 4 of these 18 rows changed); a ratio carries less of that drift, but
    // not none: in one CI run 2 of the 10 ratios' intervals did not
    // overlap. So a disagreement must replicate: the rows apart in the
    // first pair of runs are measured again, both ways, and fail only if
    // they are apart again. A lab that measured something else over SSH
    // (another datapath, one host's CPU, a reversed pair) is apart in
    // most rows every time; noise is seldom apart twice in the same row.
    let rows: Vec<(String, String)> = COMPARABLE
        .iter()
        .flat_map(|v| {
            TWO_TESTS
                .split(',')
                .map(move |t| (v.to_string(), t.to_string()))
        })
        .collect();
    let first = apart(&over_ssh, &here, &rows);
    if first.len() <= 1 {
        return;
    }
    eprintln!("apart in the first pair of runs: {first:?}; measured again");
    let mut vs: Vec<&str> = first.iter().map(|(v, _)| v.as_str()).collect();
    let mut ts: Vec<&str> = first.iter().map(|(_, t)| t.as_str()).collect();
    vs.sort();
    vs.dedup();
    ts.sort();
    ts.dedup();
    let vs = format!("kernel-vxlan,{}", vs.join(","));
    // Three rounds: a lab that measures something else is apart by
    // factors, not by the few per cent five rounds resolve.
    let (over_ssh, here) = both_ways(&f, "2", &ts.join(","), Some(&vs), "3");
    let twice = apart(&over_ssh, &here, &first);
    assert!(
        twice.len() <= 1,
        "apart in both pairs of runs: {twice:#?}\n{}",
        compare(&over_ssh.join("results.json"), &here.join("results.json"))
    );
}

/// A folder of links to everything in /usr/bin but iperf3: a host's PATH
/// without it.
fn bin_without_iperf3(dir: &Path) -> PathBuf {
    let bin = dir.join("bin-without-iperf3");
    std::fs::create_dir_all(&bin).unwrap();
    for e in std::fs::read_dir("/usr/bin").unwrap().flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("iperf3") {
            let _ = std::os::unix::fs::symlink(e.path(), bin.join(&name));
        }
    }
    bin
}

/// `tunlab bench` over the two hosts in the background, in a process
/// group of its own (as a terminal's foreground job).
fn start_run(l: &Lab, cfg: &str, both: &str, out_dir: &str) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new("ip")
        .args(["netns", "exec", l.hv1.name(), &tunlab_bin(), "bench"])
        .args([
            "--hosts",
            both,
            "--underlay",
            both,
            "--ssh-config",
            cfg,
            "--variants",
            "tunlab-geneve",
            "--tests",
            "tcp_stream-16384B-1i",
            "--samples",
            "5",
            "--out",
            out_dir,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Wait until both hosts' switches run (started from a run's work folder).
fn wait_for_switches(child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let switches = Command::new("pgrep")
            .args(["-f", "^/tmp/tl[r][0-9]+/tunlab switch"])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&switches.stdout).lines().count() >= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "the switches never ran"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));
}

/// Wait for a run to end (at most 2 minutes); its output.
fn wait_end(mut child: Child) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the run did not stop");
        std::thread::sleep(Duration::from_millis(200));
    }
    child.wait_with_output().unwrap()
}

/// Kill an sshd and every sshd under it (the sessions): every connection
/// to that host is cut at once, as when it goes away.
fn cut(sshd: &mut Sshd) {
    let mut parent = std::collections::HashMap::new();
    let mut comm = std::collections::HashMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        comm.insert(pid, stat[open + 1..close].to_string());
        let ppid = stat[close + 2..]
            .split(' ')
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        parent.insert(pid, ppid.unwrap_or(0));
    }
    let root = sshd.0.id();
    let under = |mut p: u32| {
        while p > 1 {
            if p == root {
                return true;
            }
            p = parent.get(&p).copied().unwrap_or(0);
        }
        false
    };
    for (&pid, name) in &comm {
        if pid != root && name == "sshd" && under(pid) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
    let _ = sshd.0.kill();
    let _ = sshd.0.wait();
}

#[test]
fn broken_hosts_are_named_and_a_cut_connection_stops_the_run_cleanly() {
    let f = fixture();
    let (l, dir, cfg) = (&f.lab, f.lab.dir.clone(), f.cfg.clone());
    let _a = sshd(l.hv1.name(), "172.31.0.1", 22, &dir, None);
    let mut b = sshd(l.hv2.name(), "172.31.0.2", 22, &dir, None);
    let path = format!("PATH={}:/usr/sbin", bin_without_iperf3(&dir).display());
    let _c = sshd(l.hv2.name(), "172.31.0.2", 2224, &dir, Some(&path));
    wait_for_ssh(l.hv1.name(), &cfg, "172.31.0.1");
    wait_for_ssh(l.hv1.name(), &cfg, "172.31.0.2");
    wait_for_ssh(l.hv1.name(), &cfg, "ssh://172.31.0.2:2224");
    let out_dir = dir.join("out").display().to_string();
    let run = |hosts: &str, underlay: &str, more: &[&str]| {
        let mut args = vec![
            "--hosts",
            hosts,
            "--underlay",
            underlay,
            "--ssh-config",
            &cfg,
            "--variants",
            "tunlab-geneve",
            "--tests",
            "tcp_stream-16384B-1i",
            "--out",
            &out_dir,
        ];
        args.extend_from_slice(more);
        bench(l.hv1.name(), &args)
    };
    let both = "172.31.0.1,172.31.0.2";

    // --plan: every command for each host, none run.
    let (ok, out, err) = run(both, both, &["--plan"]);
    assert!(ok, "{err}");
    for want in [
        "172.31.0.1: mkdir -p -m 700 /tmp/tlr",
        "172.31.0.2: ip netns add tlr",
        " switch --config /tmp/tlr",
        "172.31.0.2: ip netns exec tlr",
        "iperf3 -s -1 -B 192.168.30.2 -p PORT",
        "172.31.0.2: kill -TERM <the pid of ",
        "172.31.0.1: rm -rf /tmp/tlr",
        "nothing was run on either host",
    ] {
        assert!(out.contains(want), "{want} not in:\n{out}");
    }
    assert_eq!(leftovers(l), Vec::<String>::new());

    // A host without iperf3, a wrong underlay address, a refused
    // connection: each named, nothing changed on either host.
    let (ok, _, err) = run("172.31.0.1,ssh://172.31.0.2:2224", both, &[]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("ssh://172.31.0.2:2224: iperf3 not found: apt-get install iperf3; nothing was changed on either host"),
        "{err}"
    );
    let (ok, _, err) = run(both, "172.31.0.1,172.31.0.7", &[]);
    assert!(
        !ok && err.contains("the underlay address 172.31.0.7 is on none of its interfaces"),
        "{err}"
    );
    let (ok, _, err) = run("172.31.0.1,ssh://172.31.0.2:2222", both, &[]);
    assert!(
        !ok && err.contains("ssh://172.31.0.2:2222: SSH failed"),
        "{err}"
    );
    assert_eq!(leftovers(l), Vec::<String>::new());

    // Ctrl-C once both switches run: the terminal signals the whole
    // process group (tunlab and its ssh clients); the run stops, tears
    // down on both hosts and writes what it has.
    let ctrl_c = |child: &mut Child| {
        let _ = Command::new("kill")
            .args(["-s", "INT", "--", &format!("-{}", child.id())])
            .status();
    };
    let mut child = start_run(l, &cfg, both, &out_dir);
    wait_for_switches(&mut child);
    ctrl_c(&mut child);
    let out = wait_end(child);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(leftovers(l), Vec::<String>::new());

    // The connection to the second host cut once both switches run.
    let mut child = start_run(l, &cfg, both, &out_dir);
    wait_for_switches(&mut child);
    cut(&mut b);
    let out = wait_end(child);
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{}\n{err}", String::from_utf8_lossy(&out.stdout));
    assert!(!out.status.success());
    assert!(
        err.contains("tunlab bench: stopped: lost a host: 172.31.0.2: SSH failed"),
        "{err}"
    );
    assert!(err.contains("--cleanup"), "{err}");
    let r = json(&dir.join("out").join("results.json"));
    assert!(r["stopped"].as_str().unwrap().contains("172.31.0.2"), "{r}");
    // The host back: --cleanup removes what the cut run left there.
    let _b = sshd(l.hv2.name(), "172.31.0.2", 22, &dir, None);
    wait_for_ssh(l.hv1.name(), &cfg, "172.31.0.2");
    let (ok, out, err) = bench(
        l.hv1.name(),
        &[
            "--hosts",
            both,
            "--underlay",
            both,
            "--ssh-config",
            &cfg,
            "--cleanup",
        ],
    );
    eprintln!("{out}");
    assert!(ok, "{err}");
    // (Both "hosts" see this machine's one namespace list: whichever is
    // cleaned first removes it.)
    assert!(out.contains(": removed namespace tlr"), "{out}");
    assert_eq!(leftovers(l), Vec::<String>::new());
}

#[test]
fn gen_drives_the_pvp_test_against_a_node_over_ssh() {
    let f = fixture();
    let (l, dir, cfg) = (&f.lab, f.lab.dir.clone(), f.cfg.clone());
    // The node: the second host; the generator sends from the first's
    // underlay interface.
    let _b = sshd(l.hv2.name(), "172.31.0.2", 22, &dir, None);
    wait_for_ssh(l.hv1.name(), &cfg, "172.31.0.2");
    let json_path = dir.join("pvp.json");
    for node in ["userspace", "ebpf"] {
        let out = Command::new("ip")
            .args(["netns", "exec", l.hv1.name(), &tunlab_bin(), "gen"])
            .args([
                "--pvp",
                "--node",
                node,
                "--hosts",
                "172.31.0.2",
                "--underlay",
                "172.31.0.1,172.31.0.2",
                "--ssh-config",
                &cfg,
                "--size",
                "512",
                "--rate",
                "10kpps",
                "--duration",
                "2",
                "--json",
            ])
            .arg(&json_path)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        eprintln!("{stdout}\n{stderr}");
        assert!(out.status.success(), "{node}: {stderr}");
        assert!(
            stderr.contains(&format!("-> {}", l.u1)) && stderr.contains(node),
            "{stderr}"
        );
        // Every frame sent came back through the node and its tenant.
        let r = json(&json_path);
        let m = &r["rows"][0]["measured"];
        let (tx, rx) = (
            m["tx_packets"].as_u64().unwrap_or(0),
            m["rx_packets"].as_u64().unwrap_or(0),
        );
        assert!(tx > 10_000 && rx == tx && m["lost"] == 0, "{node}: {m}");
        assert!(
            stdout.contains("PVP tenant over the whole run: reflected"),
            "{stdout}"
        );
        assert_eq!(leftovers(l), Vec::<String>::new());
    }
    // A node that is not there, named before anything is sent.
    let out = Command::new("ip")
        .args(["netns", "exec", l.hv1.name(), &tunlab_bin(), "gen"])
        .args([
            "--pvp",
            "--hosts",
            "ssh://172.31.0.2:2222",
            "--underlay",
            "172.31.0.1,172.31.0.2",
            "--ssh-config",
            &cfg,
            "--duration",
            "1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("SSH failed"), "{err}");
}
