//! An Open vSwitch 3.1 instance (Debian `openvswitch-switch`) inside one
//! network namespace, here or on a real host over SSH: its own database,
//! run and log directory, never a system instance; both daemons run in the namespace (OVS's userspace
//! tunnels need the host's underlay address there), and are stopped on
//! drop. Used by the lab's `ovs-*` variants and by the interop tests.

use crate::remote::Ssh;
use crate::LabError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running ovsdb-server + ovs-vswitchd pair.
#[derive(Debug)]
pub struct Ovs {
    ns: String,
    dir: PathBuf,
    /// The real host it runs on (over SSH), or this machine.
    ssh: Option<Ssh>,
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
        Ovs {
            ns: ns.to_string(),
            dir,
            ssh: None,
        }
        .daemons()
    }

    /// The same on a real host: namespace `ns` there, `dir` (absolute, a
    /// fresh folder under the run's work folder) there.
    pub fn start_remote(ssh: &Ssh, ns: &str, dir: &str) -> Result<Ovs, LabError> {
        ssh.run(&["mkdir", "-p", dir])?;
        Ovs {
            ns: ns.to_string(),
            dir: PathBuf::from(dir),
            ssh: Some(ssh.clone()),
        }
        .daemons()
    }

    fn daemons(self) -> Result<Ovs, LabError> {
        let ovs = self;
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
        let dir = self.dir.display().to_string();
        let vars = ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"];
        if let Some(ssh) = &self.ssh {
            let env: Vec<String> = vars.iter().map(|v| format!("{v}={dir}")).collect();
            let mut v: Vec<&str> = vec!["env"];
            v.extend(env.iter().map(String::as_str));
            v.extend(["ip", "netns", "exec", &self.ns, tool]);
            v.extend_from_slice(args);
            return ssh.run(&v);
        }
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns, tool]).args(args);
        for v in vars {
            cmd.env(v, &self.dir);
        }
        let out = cmd.output().map_err(|e| {
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

    /// A file of the instance's folder ("" if unreadable).
    fn read(&self, name: &str) -> String {
        let path = self.dir.join(name);
        match &self.ssh {
            Some(ssh) => ssh
                .run(&["cat", &path.display().to_string()])
                .unwrap_or_default(),
            None => std::fs::read_to_string(path).unwrap_or_default(),
        }
    }

    /// ovs-vswitchd's log so far.
    pub fn log(&self) -> String {
        self.read("ovs-vswitchd.log")
    }

    /// ovs-vswitchd's pid (its CPU is the datapath's).
    pub fn vswitchd_pid(&self) -> Option<u32> {
        self.read("ovs-vswitchd.pid").trim().parse().ok()
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        if let Some(ssh) = &self.ssh {
            let d = crate::remote::quote(&self.dir.display().to_string());
            let script = format!(
                "p=$(cat {d}/ovs-vswitchd.pid {d}/ovsdb-server.pid 2>/dev/null); [ -n \"$p\" ] || exit 0; kill -TERM $p 2>/dev/null; i=0; while [ $i -lt 30 ]; do alive=; for x in $p; do kill -0 $x 2>/dev/null && alive=1; done; [ -z \"$alive\" ] && break; sleep 0.1; i=$((i+1)); done; true"
            );
            let _ = ssh.run(&["sh", "-c", &script]);
            return;
        }
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
