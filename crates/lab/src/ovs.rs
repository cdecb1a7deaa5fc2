//! An Open vSwitch 3.1 instance (Debian `openvswitch-switch`) inside one
//! network namespace: its own database, run and log directory, never a
//! system instance; both daemons run in the namespace (OVS's userspace
//! tunnels need the host's underlay address there), and are stopped on
//! drop. Used by the lab's `ovs-*` variants and by the interop tests.

use crate::LabError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running ovsdb-server + ovs-vswitchd pair.
#[derive(Debug)]
pub struct Ovs {
    ns: String,
    dir: PathBuf,
}

impl Ovs {
    /// Create a database under `dir/ovs` and start both daemons in `ns`.
    /// What an earlier run left in that folder (the same `--out`) goes
    /// first: `ovsdb-tool create` refuses an existing database.
    pub fn start(ns: &str, dir: &Path) -> Result<Ovs, LabError> {
        // Absolute: OVS resolves a relative --pidfile against OVS_RUNDIR,
        // itself relative, and fails on the doubled path (`tunlab bench`
        // writes under ./tunlab-results by default).
        let dir = std::path::absolute(dir.join("ovs")).map_err(|err| LabError::Io {
            path: dir.display().to_string(),
            err,
        })?;
        match std::fs::remove_dir_all(&dir) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(LabError::Io {
                    path: dir.display().to_string(),
                    err,
                })
            }
            _ => {}
        }
        std::fs::create_dir_all(&dir).map_err(|err| LabError::Io {
            path: dir.display().to_string(),
            err,
        })?;
        let ovs = Ovs {
            ns: ns.to_string(),
            dir,
        };
        let s = |p: &str| ovs.dir.join(p).display().to_string();
        let db = s("conf.db");
        ovs.run(
            "ovsdb-tool",
            &["create", &db, "/usr/share/openvswitch/vswitch.ovsschema"],
        )?;
        ovs.run(
            "ovsdb-server",
            &[
                &db,
                &format!("--remote=punix:{}", s("db.sock")),
                &format!("--pidfile={}", s("ovsdb-server.pid")),
                "--detach",
                &format!("--log-file={}", s("ovsdb-server.log")),
            ],
        )?;
        ovs.vsctl(&["--no-wait", "init"])?;
        ovs.run(
            "ovs-vswitchd",
            &[
                &format!("unix:{}", s("db.sock")),
                &format!("--pidfile={}", s("ovs-vswitchd.pid")),
                "--detach",
                &format!("--log-file={}", s("ovs-vswitchd.log")),
            ],
        )?;
        Ok(ovs)
    }

    /// Run an Open vSwitch tool in the namespace, pointed at this instance.
    pub fn run(&self, tool: &str, args: &[&str]) -> Result<String, LabError> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, tool])
            .args(args)
            .env("OVS_RUNDIR", &self.dir)
            .env("OVS_LOGDIR", &self.dir)
            .env("OVS_DBDIR", &self.dir)
            .env("OVS_SYSCONFDIR", &self.dir)
            .output()
            .map_err(|e| {
                LabError::Setup(format!("{tool}: {e} (apt-get install openvswitch-switch)"))
            })?;
        if !out.status.success() {
            return Err(LabError::Setup(format!(
                "{tool} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    pub fn vsctl(&self, args: &[&str]) -> Result<String, LabError> {
        let db = format!("--db=unix:{}", self.dir.join("db.sock").display());
        let mut v = vec![db.as_str()];
        v.extend_from_slice(args);
        self.run("ovs-vsctl", &v)
    }

    pub fn ofctl(&self, args: &[&str]) -> Result<String, LabError> {
        self.run("ovs-ofctl", args)
    }

    /// ovs-vswitchd's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ovs-vswitchd.log")).unwrap_or_default()
    }

    /// ovs-vswitchd's pid (its CPU is the datapath's).
    pub fn vswitchd_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.join("ovs-vswitchd.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        let mut pids = Vec::new();
        for p in ["ovs-vswitchd.pid", "ovsdb-server.pid"] {
            if let Some(pid) = std::fs::read_to_string(self.dir.join(p))
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
                pids.push(pid);
            }
        }
        // Wait for them to go, so that the namespace can go too.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while std::time::Instant::now() < end
            && pids
                .iter()
                .any(|p| Path::new(&format!("/proc/{p}")).exists())
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
