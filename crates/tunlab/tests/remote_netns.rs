//! `tunlab bench --hosts ... --check` (issue 18, first part) against real
//! OpenSSH servers (Debian's `openssh-server`), each in a namespace of
//! the test with its own host key, taking only a key this test makes, and
//! listening only on that namespace's underlay address: the check finds
//! each host's underlay interface and tools, and a wrong address, a
//! refused connection and a missing tool each get a clear error. Needs
//! root (namespaces) and openssh-server (scripts/install-deps).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    keygen(&key);
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
        .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_tunlab"), "bench"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn hosts_are_checked_over_ssh_and_what_is_wrong_is_named() {
    let l = lab();
    let _privsep = PrivsepDir::ensure();
    let dir: PathBuf = l.dir.clone();
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
    let cfg = cfg.display().to_string();
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
        &["--hosts", "a,b", "--underlay", "1.1.1.1,2.2.2.2"],
    );
    assert!(!ok && err.contains("not built yet"), "{err}");
}
