//! Network namespaces that tunlab or its tests create: unique names, removed
//! on drop, and leftovers of killed runs found by name and removed.
//!
//! Set-up goes through iproute2 (`ip netns`, `ip link`, `ip addr`): it is
//! not on the packet path, and `ip`'s own error messages are what an
//! operator knows how to read.

use std::fs::File;
use std::process::Command;

/// Why a namespace command failed: the command line and what it printed.
#[derive(Debug, thiserror::Error)]
#[error("`{cmd}` failed: {stderr}")]
pub struct CmdError {
    pub cmd: String,
    pub stderr: String,
}

/// Run a command, returning its stdout or an error with its stderr.
pub fn run(args: &[&str]) -> Result<String, CmdError> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| CmdError {
            cmd: args.join(" "),
            stderr: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(CmdError {
            cmd: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A named network namespace, deleted when dropped.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Create `<prefix>-<pid>-<n>`; namespaces with this prefix whose pid
    /// is gone (a killed run) are removed first.
    pub fn create(prefix: &str, n: usize) -> Result<Netns, CmdError> {
        sweep(prefix);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let _ = run(&["ip", "netns", "del", &name]);
        run(&["ip", "netns", "add", &name])?;
        run(&["ip", "-n", &name, "link", "set", "lo", "up"])?;
        Ok(Netns { name })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Run `ip ARGS` inside the namespace.
    pub fn ip(&self, args: &[&str]) -> Result<String, CmdError> {
        ip(&self.name, args)
    }

    /// Move the calling thread into the namespace.
    pub fn enter(&self) -> Result<(), CmdError> {
        enter(&self.name)
    }

    /// A veth pair: `name` here, `peer_name` in the namespace named
    /// `peer` (or here too when `peer` is this one), both up with `opts`.
    pub fn veth(
        &self,
        name: &str,
        peer: &str,
        peer_name: &str,
        opts: Veth,
    ) -> Result<(), CmdError> {
        let mut args: Vec<String> = vec!["link".into(), "add".into()];
        args.extend(opts.end(name, opts.macs.map(|m| m.0)));
        args.extend(["type".into(), "veth".into(), "peer".into(), "name".into()]);
        args.extend(opts.end(peer_name, opts.macs.map(|m| m.1)));
        if peer != self.name {
            args.extend(["netns".into(), peer.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.ip(&args)?;
        self.up(name)?;
        ip(peer, &["link", "set", peer_name, "up"]).map(drop)
    }

    /// Give device `dev` address `cidr` (IPv6 without duplicate address
    /// detection, usable at once).
    pub fn addr(&self, dev: &str, cidr: &str) -> Result<(), CmdError> {
        let mut args = vec!["addr", "add", cidr, "dev", dev];
        if cidr.contains(':') {
            args.push("nodad");
        }
        self.ip(&args).map(drop)
    }

    /// Bring device `dev` up.
    pub fn up(&self, dev: &str) -> Result<(), CmdError> {
        self.ip(&["link", "set", dev, "up"]).map(drop)
    }

    /// Set a sysctl inside the namespace (`net.ipv6.conf.all.disable_ipv6`).
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), CmdError> {
        run(&[
            "ip",
            "netns",
            "exec",
            &self.name,
            "sysctl",
            "-q",
            "-w",
            &format!("{key}={value}"),
        ])
        .map(drop)
    }
}

/// How a veth pair is made (`None`: the kernel's default).
#[derive(Debug, Clone, Copy, Default)]
pub struct Veth {
    pub mtu: Option<u32>,
    /// TX and RX queues per end (AF_XDP binds a socket per queue).
    pub queues: Option<u32>,
    /// The first end's and the peer's MAC addresses.
    pub macs: Option<(&'static str, &'static str)>,
}

impl Veth {
    /// One end's words for `ip link add`: its name, MAC, MTU and queues.
    fn end(&self, name: &str, mac: Option<&str>) -> Vec<String> {
        let mut v = vec![name.to_string()];
        if let Some(a) = mac {
            v.extend(["address".into(), a.to_string()]);
        }
        if let Some(m) = self.mtu {
            v.extend(["mtu".into(), m.to_string()]);
        }
        if let Some(q) = self.queues {
            v.extend([
                "numtxqueues".into(),
                q.to_string(),
                "numrxqueues".into(),
                q.to_string(),
            ]);
        }
        v
    }
}

/// Run `ip ARGS` inside the namespace `name`.
pub fn ip(name: &str, args: &[&str]) -> Result<String, CmdError> {
    let mut v = vec!["ip", "-n", name];
    v.extend_from_slice(args);
    run(&v)
}

/// Move the calling thread into the namespace `name` (network namespaces
/// are per thread on Linux, so other threads stay where they are).
pub fn enter(name: &str) -> Result<(), CmdError> {
    let path = format!("/run/netns/{name}");
    let f = File::open(&path).map_err(|e| CmdError {
        cmd: format!("open {path}"),
        stderr: e.to_string(),
    })?;
    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| CmdError {
        cmd: format!("setns {path}"),
        stderr: e.to_string(),
    })
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.name]);
    }
}

/// Remove namespaces named `<prefix>-<pid>-<n>` whose process is gone.
pub fn sweep(prefix: &str) {
    let Ok(list) = run(&["ip", "netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = run(&["ip", "netns", "del", name]);
        }
    }
}

/// `SO_NETNS_COOKIE` (Linux 5.14, asm-generic value): the network
/// namespace's cookie, read from any socket in it.
const SO_NETNS_COOKIE: nix::libc::c_int = 71;

/// The kernel's cookie for the calling thread's network namespace. Unlike
/// the namespace's inode number, which a new namespace may get again, no
/// other namespace gets this number before the machine restarts, so it
/// can name what belongs to one namespace (the kernel datapath's pins).
pub fn cookie() -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let sock = std::os::unix::net::UnixDatagram::unbound()?;
    let mut value = 0u64;
    let mut len = std::mem::size_of::<u64>() as nix::libc::socklen_t;
    // SAFETY: `value` and `len` outlive the call, and `len` is the size of
    // the buffer `value` points at.
    let r = unsafe {
        nix::libc::getsockopt(
            sock.as_raw_fd(),
            nix::libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&mut value as *mut u64).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(value)
}

/// The cookie of the network namespace whose file is `path` (a
/// `/run/netns/NAME`, a `/proc/PID/ns/net`), read from a thread that
/// enters it.
pub fn cookie_of(path: &std::path::Path) -> std::io::Result<u64> {
    let f = File::open(path)?;
    std::thread::scope(|s| {
        s.spawn(move || {
            nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET)?;
            cookie()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(std::io::Error::other(
                "the thread reading the cookie failed",
            ))
        })
    })
}

/// The cookies of every network namespace alive now: each one a process
/// is in, and each named one (`ip netns add`), which may have none.
pub fn live_cookies() -> std::collections::HashSet<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["/proc", "/run/netns"] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if dir == "/proc" && name.parse::<u32>().is_ok() {
                files.push(e.path().join("ns/net"));
            } else if dir == "/run/netns" {
                files.push(e.path());
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    let mut cookies = std::collections::HashSet::new();
    for f in files {
        // One namespace, many processes: read each once.
        let Ok(m) = std::fs::metadata(&f) else {
            continue;
        };
        if seen.insert((m.dev(), m.ino())) {
            if let Ok(c) = cookie_of(&f) {
                cookies.insert(c);
            }
        }
    }
    cookies
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_keeps_its_cookie_and_another_has_its_own() {
        let here = cookie().unwrap();
        assert_ne!(here, 0);
        assert_eq!(cookie().unwrap(), here);
        assert_eq!(
            cookie_of(std::path::Path::new("/proc/self/ns/net")).unwrap(),
            here
        );
        let ns = Netns::create("tl-cookie", 0).unwrap();
        let path = std::path::PathBuf::from(format!("/run/netns/{}", ns.name()));
        let there = cookie_of(&path).unwrap();
        assert_ne!(there, here);
        let live = live_cookies();
        assert!(live.contains(&here) && live.contains(&there), "{live:?}");
        drop(ns);
        assert!(!live_cookies().contains(&there));
    }
}
