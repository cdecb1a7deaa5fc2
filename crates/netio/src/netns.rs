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
