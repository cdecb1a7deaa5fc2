//! A host of the lab: a place where commands run and daemons live. Either
//! a network namespace on this machine (the default lab), or a real server
//! reached over SSH ([`crate::remote`]): its own root namespace (where the
//! datapath meets the real underlay) or a tenant namespace the lab made on
//! it. Everything the lab does "on a host" goes through this type.

use crate::remote::{Ssh, REMOTE_PREFIX};
use crate::LabError;
use std::process::{Child, Command, Stdio};

use tunlab_netio::netns::{self, Netns};

/// The prefix of every namespace the lab creates on this machine
/// (`tunlab bench --cleanup` removes leftovers by it).
pub const PREFIX: &str = "tl-bench";

#[derive(Debug)]
enum Place {
    Netns(Netns),
    /// A real host: its root namespace (`ns: None`) or a namespace the lab
    /// created there (removed on drop).
    Remote {
        ssh: Ssh,
        ns: Option<String>,
    },
}

/// One host (or tenant) of the lab.
#[derive(Debug)]
pub struct Host {
    place: Place,
    /// A short role name for messages: h1, h2, t1, t2.
    pub role: &'static str,
}

/// The shell around a command started on a remote host: it runs the
/// command with stdin closed, prints its pid first when `$1` is `pid`, and
/// kills it when the SSH connection's stdin closes (the run killed its
/// `ssh`, or the connection was lost), so that no tool outlives the run.
const REMOTE_SPAWN: &str = r#"want=$1; shift
exec 3<&0
"$@" </dev/null 3<&- &
p=$!
[ "$want" = pid ] && echo "$p"
{ cat <&3 >/dev/null 2>&1; kill -TERM "$p" 2>/dev/null; } >/dev/null 2>&1 &
w=$!
exec 3<&-
wait "$p"; r=$?
kill "$w" 2>/dev/null
exit $r"#;

/// A long-running process on a host, and its pid there (the one whose CPU
/// counts).
#[derive(Debug)]
pub struct Daemon {
    pub child: Child,
    pub pid: u32,
    ssh: Option<Ssh>,
    /// Its command line, for messages.
    cmd: String,
}

impl Daemon {
    /// A process started here.
    pub fn local(child: Child) -> Daemon {
        Daemon {
            pid: child.id(),
            child,
            ssh: None,
            cmd: String::new(),
        }
    }

    /// Stop it with SIGTERM and wait for it (on a remote host: until its
    /// pid is gone, up to 5 s, then SIGKILL).
    pub fn stop(&mut self) {
        if let Some(ssh) = self.ssh.as_ref().filter(|_| crate::remote::planning()) {
            println!("{}: kill -TERM <the pid of {}>", ssh.dest, self.cmd);
        } else if let Some(ssh) = &self.ssh {
            let script = format!(
                "kill -TERM {p} 2>/dev/null; i=0; while kill -0 {p} 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; kill -KILL {p} 2>/dev/null; true",
                p = self.pid
            );
            let _ = ssh.run(&["sh", "-c", &script]);
            let _ = self.child.kill();
        } else {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = self.child.wait();
    }
}

impl Host {
    /// A fresh namespace on this machine; `n` keeps names unique within
    /// this process.
    pub fn create(role: &'static str, n: usize) -> Result<Host, LabError> {
        Ok(Host {
            place: Place::Netns(Netns::create(PREFIX, n)?),
            role,
        })
    }

    /// A real host's root namespace.
    pub fn remote(ssh: Ssh, role: &'static str) -> Host {
        Host {
            place: Place::Remote { ssh, ns: None },
            role,
        }
    }

    /// A fresh namespace `name` on a real host (it must start with
    /// [`REMOTE_PREFIX`]); removed on drop.
    pub fn remote_ns(ssh: &Ssh, name: &str, role: &'static str) -> Result<Host, LabError> {
        debug_assert!(name.starts_with(REMOTE_PREFIX));
        ssh.run(&["ip", "netns", "add", name])?;
        Ok(Host {
            place: Place::Remote {
                ssh: ssh.clone(),
                ns: Some(name.to_string()),
            },
            role,
        })
    }

    /// The namespace's name ("" for a real host's root namespace).
    pub fn name(&self) -> &str {
        match &self.place {
            Place::Netns(ns) => ns.name(),
            Place::Remote { ns, .. } => ns.as_deref().unwrap_or(""),
        }
    }

    /// The namespace, for a host that is one here (to build links with
    /// netio's typed set-up); `None` on a real host.
    pub fn netns(&self) -> Option<&Netns> {
        match &self.place {
            Place::Netns(ns) => Some(ns),
            Place::Remote { .. } => None,
        }
    }

    /// The SSH destination of a real host.
    pub fn ssh(&self) -> Option<&Ssh> {
        match &self.place {
            Place::Remote { ssh, .. } => Some(ssh),
            Place::Netns(_) => None,
        }
    }

    /// `args` as they run on the host (`ip netns exec NS …` where there is
    /// a namespace).
    fn argv<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let ns = self.name();
        let mut v = Vec::with_capacity(args.len() + 4);
        if !ns.is_empty() {
            v.extend(["ip", "netns", "exec", ns]);
        }
        v.extend_from_slice(args);
        v
    }

    /// Run a command to completion; its stdout, or an error with stderr.
    pub fn run(&self, args: &[&str]) -> Result<String, LabError> {
        match &self.place {
            Place::Netns(_) => Ok(netns::run(&self.argv(args))?),
            Place::Remote { ssh, .. } => ssh.run(&self.argv(args)),
        }
    }

    /// `ip ARGS` on this host.
    pub fn ip(&self, args: &[&str]) -> Result<String, LabError> {
        match &self.place {
            Place::Netns(ns) => Ok(ns.ip(args)?),
            Place::Remote { .. } => {
                let mut v = vec!["ip"];
                v.extend_from_slice(args);
                self.run(&v)
            }
        }
    }

    /// Write `data` to `path` on the host (made executable when `exec`).
    pub fn write_file(&self, path: &str, data: &[u8], exec: bool) -> Result<(), LabError> {
        match &self.place {
            Place::Netns(_) => {
                std::fs::write(path, data).map_err(|err| LabError::Io {
                    path: path.to_string(),
                    err,
                })?;
                if exec {
                    use std::os::unix::fs::PermissionsExt;
                    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
                }
                Ok(())
            }
            Place::Remote { ssh, .. } => {
                let q = crate::remote::quote(path);
                let script = if exec {
                    format!("cat > {q} && chmod 755 {q}")
                } else {
                    format!("cat > {q}")
                };
                ssh.run_with_input(&["sh", "-c", &script], data).map(|_| ())
            }
        }
    }

    /// Start a long-running command (a traffic tool) with its output
    /// captured. On a remote host it ends when the returned `ssh` is
    /// killed.
    pub fn spawn(&self, args: &[&str]) -> Result<Child, LabError> {
        self.start(args, false).map(|(c, _)| c)
    }

    /// Start a daemon and learn its pid on the host.
    pub fn spawn_daemon(&self, args: &[&str]) -> Result<Daemon, LabError> {
        let (mut child, pid) = self.start(args, true)?;
        let pid = match pid {
            Some(p) => p,
            None => child.id(),
        };
        if pid == 0 && !crate::remote::planning() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(LabError::Setup(format!(
                "{}: {} did not start",
                self.role,
                args.join(" ")
            )));
        }
        Ok(Daemon {
            child,
            pid,
            ssh: self.ssh().cloned(),
            cmd: args.join(" "),
        })
    }

    fn start(&self, args: &[&str], want_pid: bool) -> Result<(Child, Option<u32>), LabError> {
        let argv = self.argv(args);
        let (mut cmd, remote) = match &self.place {
            Place::Netns(_) => {
                let mut c = Command::new(argv[0]);
                c.args(&argv[1..]).stdin(Stdio::null());
                (c, false)
            }
            Place::Remote { ssh, .. } if crate::remote::planning() => {
                // `--plan`: the command is shown; `cat` stands in for it
                // until it is stopped.
                ssh.print_plan(&argv, 0);
                let mut c = Command::new("cat");
                c.stdin(Stdio::piped());
                (c, false)
            }
            Place::Remote { ssh, .. } => {
                let mut v = vec!["sh", "-c", REMOTE_SPAWN, "sh"];
                v.push(if want_pid { "pid" } else { "-" });
                v.extend_from_slice(&argv);
                let line = ssh.command(&v);
                let mut c = Command::new(&line[0]);
                // stdin stays open: its end is the remote command's end.
                c.args(&line[1..]).stdin(Stdio::piped());
                (c, true)
            }
        };
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                LabError::Setup(format!(
                    "{}: cannot start {}: {e}",
                    self.role,
                    args.join(" ")
                ))
            })?;
        if !(remote && want_pid) {
            let planned = want_pid && self.ssh().is_some();
            return Ok((child, planned.then_some(0)));
        }
        // The first line the remote shell prints is the pid.
        let pid = read_line(&mut child).trim().parse::<u32>().ok();
        Ok((child, Some(pid.unwrap_or(0))))
    }
}

/// One line of a child's stdout, without its newline (what there is when
/// the output ends first). Byte by byte: nothing past the line is taken
/// from the pipe, so the rest stays for whoever reads next.
pub(crate) fn read_line(c: &mut Child) -> String {
    let mut line = Vec::new();
    if let Some(out) = c.stdout.as_mut() {
        let mut b = [0u8; 1];
        while std::io::Read::read(out, &mut b).ok() == Some(1) && b[0] != b'\n' {
            line.push(b[0]);
        }
    }
    String::from_utf8_lossy(&line).into_owned()
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Place::Remote { ssh, ns: Some(ns) } = &self.place {
            // Tools still running there go first: a deleted namespace
            // keeps its processes.
            let script = format!(
                "ip netns pids {n} 2>/dev/null | xargs -r kill -KILL 2>/dev/null; ip netns del {n}",
                n = crate::remote::quote(ns)
            );
            if let Err(e) = ssh.run(&["sh", "-c", &script]) {
                eprintln!(
                    "tunlab bench: {}: cannot remove namespace {ns}: {e}",
                    ssh.dest
                );
            }
        }
    }
}

/// Remove namespaces of killed lab runs (`tunlab bench --cleanup`); returns
/// how many went.
pub fn cleanup() -> usize {
    let before = netns::run(&["ip", "netns", "list"]).unwrap_or_default();
    let count = |s: &str| s.lines().filter(|l| l.starts_with(PREFIX)).count();
    netns::sweep(PREFIX);
    let after = netns::run(&["ip", "netns", "list"]).unwrap_or_default();
    count(&before) - count(&after).min(count(&before))
}
