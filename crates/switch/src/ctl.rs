//! The control socket: `tunlab ctl` talks to a running node over a unix
//! socket (mode 0600), one request line, one reply, in the spirit of
//! ovs-ofctl / ovs-appctl.
//!
//! Requests: `show`, `add-port NAME KEY=VALUE...` (the keys of a
//! `[[port]]` table), `del-port NAME`, `dump-flows`, `add-flow RULE`,
//! `del-flows [MATCH]`, `del-flows --strict RULE-MATCH`, `stats`,
//! `stats --cycles` and `cycles on|off` (time per stage). A reply
//! starts with `OK` or `ERROR` on its own line; a rejected rule or port
//! leaves the node as it was.

use crate::config::parse_port_args;
use crate::node::Node;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tunlab_dp::{format_flow, parse_flow, Match};

/// The listening side, owned by the node's loop.
#[derive(Debug)]
pub struct CtlServer {
    listener: UnixListener,
    path: PathBuf,
}

impl CtlServer {
    /// Listen at `path`, mode 0600. A stale socket file (nobody answers) is
    /// replaced; a live one is an error.
    pub fn bind(path: &Path) -> std::io::Result<CtlServer> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another tunlab switch is listening there (give this node another name or control_socket)",
            ));
        }
        // Nobody answers: a stale socket from a killed run.
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        Ok(CtlServer {
            listener,
            path: path.to_path_buf(),
        })
    }

    pub fn listener(&self) -> &UnixListener {
        &self.listener
    }

    /// Serve every waiting client (each sends one request line).
    pub fn serve(&self, node: &mut Node) {
        while let Ok((stream, _)) = self.listener.accept() {
            let _ = serve_one(stream, node);
        }
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_one(stream: UnixStream, node: &mut Node) -> std::io::Result<()> {
    // A client gets a short while to send its line; the datapath waits for
    // no one longer than that.
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let reply = match handle(line.trim(), node) {
        Ok(text) => format!("OK\n{text}"),
        Err(text) => format!("ERROR\n{text}\n"),
    };
    (&stream).write_all(reply.as_bytes())
}

/// Carry out one request; the text of the reply.
pub fn handle(req: &str, node: &mut Node) -> Result<String, String> {
    let (cmd, arg) = req.split_once(char::is_whitespace).unwrap_or((req, ""));
    let arg = arg.trim();
    let names = &node.port_map();
    match cmd {
        "add-port" => {
            let port = parse_port_args(arg).map_err(|e| e.to_string())?;
            node.add_port(&port).map_err(|e| e.to_string())?;
            Ok(String::new())
        }
        "del-port" => {
            node.remove_port(arg)?;
            Ok(String::new())
        }
        "show" => {
            let mut s = format!("node {}\n", node.name);
            for (name, ofport, kind, _) in node.ports() {
                s.push_str(&format!(" {ofport}({name}): {kind}\n"));
            }
            Ok(s)
        }
        "dump-flows" => {
            let now = node.uptime_ns();
            let mut s = String::new();
            for r in node.classifier.rules() {
                let secs = now.saturating_sub(r.added) as f64 / 1e9;
                s.push_str(&format!(
                    " cookie={:#x}, duration={secs:.3}s, table={}, n_packets={}, n_bytes={}, {}\n",
                    r.flow.cookie,
                    r.flow.table,
                    r.packets,
                    r.bytes,
                    format_flow(&r.flow, names)
                ));
            }
            Ok(s)
        }
        "add-flow" => {
            let rule = parse_flow(arg, names).map_err(|e| e.to_string())?;
            let now = node.uptime_ns();
            let replaced = node.classifier.add(rule, now);
            Ok(if replaced {
                "replaced an existing rule\n".into()
            } else {
                String::new()
            })
        }
        "del-flows" => {
            let (strict, text) = match arg.strip_prefix("--strict") {
                Some(rest) => (true, rest.trim()),
                None => (false, arg),
            };
            let (table, m, prio) = if text.is_empty() {
                (None, Match::default(), None)
            } else {
                let r = parse_flow(&format!("{text} actions=drop"), names)
                    .map_err(|e| e.to_string())?;
                let has_table = text.contains("table=");
                (
                    has_table.then_some(r.table),
                    r.m,
                    strict.then_some(r.priority),
                )
            };
            let n = node.classifier.delete(table, &m, prio);
            Ok(format!("deleted {n} rules\n"))
        }
        "stats" if arg.trim() == "--cycles" => Ok(node.profile.table()),
        "cycles" => match arg.trim() {
            "on" => {
                node.profile.set(true);
                Ok("cycles: on, counting from zero\n".into())
            }
            "off" => {
                node.profile.set(false);
                Ok("cycles: off\n".into())
            }
            other => Err(format!("cycles takes 'on' or 'off', not '{other}'")),
        },
        "stats" if !arg.trim().is_empty() => Err(format!(
            "stats takes nothing or --cycles, not '{}'",
            arg.trim()
        )),
        "stats" => {
            let mut s = String::new();
            for (name, ofport, kind, st) in node.ports() {
                s.push_str(&format!(
                    "port {ofport} {name} ({kind}): rx {} pkts {} bytes, tx {} pkts {} bytes, tx errors {}\n",
                    st.rx_packets, st.rx_bytes, st.tx_packets, st.tx_bytes, st.tx_errors
                ));
                let q = node.queue_rx(name);
                if q.len() > 1 {
                    let per: Vec<String> = q.iter().map(u64::to_string).collect();
                    s.push_str(&format!("  rx per queue: {}\n", per.join(" ")));
                }
            }
            let mut drops: Vec<_> = node.drops.iter().collect();
            drops.sort();
            for (why, n) in drops {
                s.push_str(&format!("dropped {why}: {n}\n"));
            }
            let mut frag: Vec<_> = node.outer_fragmented.iter().collect();
            frag.sort();
            for (kind, n) in frag {
                s.push_str(&format!("sent in fragmented outer packets ({kind}): {n}\n"));
            }
            let (hits, misses) = node.cache_stats();
            s.push_str(&format!(
                "exact-match cache: {hits} hits, {misses} misses\n"
            ));
            Ok(s)
        }
        "" => {
            Err("empty request (show, add-port NAME KEY=VALUE..., del-port NAME, dump-flows, add-flow RULE, del-flows [MATCH], stats [--cycles], cycles on|off)".into())
        }
        other => Err(format!(
            "unknown request '{other}' (show, add-port NAME KEY=VALUE..., del-port NAME, dump-flows, add-flow RULE, del-flows [MATCH], stats [--cycles], cycles on|off)"
        )),
    }
}

/// The client side: send one request, return (ok, reply text).
pub fn request(path: &Path, req: &str) -> std::io::Result<(bool, String)> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(req.as_bytes())?;
    s.write_all(b"\n")?;
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut s, &mut reply)?;
    match reply.split_once('\n') {
        Some(("OK", rest)) => Ok((true, rest.to_string())),
        Some(("ERROR", rest)) => Ok((false, rest.to_string())),
        _ => Ok((false, format!("unexpected reply: {reply}"))),
    }
}
