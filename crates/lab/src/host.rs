//! A host of the lab: a place where commands run and daemons live. Today a
//! network namespace on this machine; everything the lab does "on a host"
//! goes through this type, so that a remote server can take its place.

use crate::LabError;
use std::process::{Child, Command, Stdio};

use tunlab_netio::netns::{self, Netns};

/// The prefix of every namespace the lab creates (`tunlab bench --cleanup`
/// removes leftovers by it).
pub const PREFIX: &str = "tl-bench";

/// One host (or tenant) of the lab.
#[derive(Debug)]
pub struct Host {
    ns: Netns,
    /// A short role name for messages: h1, h2, t1, t2.
    pub role: &'static str,
}

impl Host {
    /// A fresh namespace; `n` keeps names unique within this process.
    pub fn create(role: &'static str, n: usize) -> Result<Host, LabError> {
        Ok(Host {
            ns: Netns::create(PREFIX, n)?,
            role,
        })
    }

    pub fn name(&self) -> &str {
        self.ns.name()
    }

    /// Run a command to completion; its stdout, or an error with stderr.
    pub fn run(&self, args: &[&str]) -> Result<String, LabError> {
        let mut v = vec!["ip", "netns", "exec", self.ns.name()];
        v.extend_from_slice(args);
        Ok(netns::run(&v)?)
    }

    /// `ip ARGS` on this host.
    pub fn ip(&self, args: &[&str]) -> Result<String, LabError> {
        Ok(self.ns.ip(args)?)
    }

    /// Start a long-running command (a daemon or a traffic tool) with its
    /// output captured.
    pub fn spawn(&self, args: &[&str]) -> Result<Child, LabError> {
        Command::new("ip")
            .args(["netns", "exec", self.ns.name()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                LabError::Setup(format!(
                    "{}: cannot start {}: {e}",
                    self.role,
                    args.join(" ")
                ))
            })
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
