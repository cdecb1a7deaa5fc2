//! Keep the host's TCP stack from answering STT.
//!
//! STT segments look like TCP to the host: a raw socket receives a copy,
//! and the kernel's own TCP, which has no connection on the STT port,
//! answers each with a reset (draft-davie-stt-08 § 3.1 expects the tunnel
//! endpoint, not the host stack, to own the port). OVS's kernel STT hooks
//! the receive path; from userspace the portable way is a netfilter rule
//! that drops outgoing resets from the STT port. The rule lives in its own
//! nftables table in the current network namespace and is removed when the
//! guard drops.

use crate::netns::{run, CmdError};
use std::io::Write;
use std::process::{Command, Stdio};

/// An installed nftables table that drops TCP resets sent from one port.
#[derive(Debug)]
pub struct RstGuard {
    table: String,
}

impl RstGuard {
    /// Install the rule for resets from `port`; `owner` names the table
    /// (`tunlab_<owner>_<port>`), so two switches in one namespace do not
    /// share one. Fails with a message that says how to get `nft`.
    pub fn install(owner: &str, port: u16) -> Result<RstGuard, CmdError> {
        let clean: String = owner
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let table = format!("tunlab_{clean}_{port}");
        let rules = format!(
            "table inet {table} {{\n\
             \x20 chain out {{\n\
             \x20   type filter hook output priority 0; policy accept;\n\
             \x20   tcp sport {port} tcp flags & rst == rst drop\n\
             \x20 }}\n\
             }}\n"
        );
        let err = |stderr: String| CmdError {
            cmd: format!("nft -f - (table inet {table})"),
            stderr,
        };
        // A table left by a killed run of the same switch is replaced.
        let _ = run(&["nft", "delete", "table", "inet", &table]);
        let mut child = Command::new("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                err(format!(
                    "{e}: STT needs nft (Debian package nftables) to stop this host's TCP \
                     from resetting STT segments; apt-get install nftables"
                ))
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(rules.as_bytes())
                .map_err(|e| err(e.to_string()))?;
        }
        let out = child.wait_with_output().map_err(|e| err(e.to_string()))?;
        if !out.status.success() {
            return Err(err(String::from_utf8_lossy(&out.stderr).trim().to_string()));
        }
        Ok(RstGuard { table })
    }

    /// The nftables table's name.
    pub fn table(&self) -> &str {
        &self.table
    }
}

impl Drop for RstGuard {
    fn drop(&mut self) {
        let _ = run(&["nft", "delete", "table", "inet", &self.table]);
    }
}
