//! The control socket: `tunlab ctl` talks to a running node over a unix
//! socket (mode 0600), one request line, one reply, in the spirit of
//! ovs-ofctl / ovs-appctl.
//!
//! Requests: `show`, `add-port NAME KEY=VALUE...` (the keys of a
//! `[[port]]` table), `del-port NAME`, `dump-flows`, `add-flow RULE`,
//! `del-flows [MATCH]`, `del-flows --strict RULE-MATCH`, and over a
//! caching datapath `dump-flows --datapath` and `del-flows --datapath`
//! (its cached flows, as `ovs-dpctl dump-flows` / `del-flows`), `stats`,
//! `stats --cycles` and `cycles on|off` (time per stage). A reply
//! starts with `OK` or `ERROR` on its own line; a rejected rule or port
//! leaves the node as it was. Served by the node's main thread, which
//! reaches the packet workers by message (`workers`).

use crate::config::parse_port_args;
use crate::stats::NodeStats;
use crate::workers::{Switch, WorkerError};
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

    /// Wait up to `timeout_ms` for a client; whether one is waiting.
    pub fn wait(&self, timeout_ms: u16) -> bool {
        use nix::poll::{poll, PollFd, PollFlags};
        use std::os::fd::AsFd;
        let mut fds = [PollFd::new(self.listener.as_fd(), PollFlags::POLLIN)];
        matches!(poll(&mut fds, timeout_ms), Ok(n) if n > 0)
    }

    /// Serve every waiting client (each sends one request line).
    pub fn serve(&self, sw: &mut Switch) {
        while let Ok((stream, _)) = self.listener.accept() {
            let _ = serve_one(stream, sw);
        }
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_one(stream: UnixStream, sw: &mut Switch) -> std::io::Result<()> {
    // A client gets a short while to send its line (the workers move
    // packets meanwhile; only other clients wait).
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let reply = match handle(line.trim(), sw) {
        Ok(text) => format!("OK\n{text}"),
        Err(text) => format!("ERROR\n{text}\n"),
    };
    (&stream).write_all(reply.as_bytes())
}

/// Carry out one request; the text of the reply.
pub fn handle(req: &str, sw: &mut Switch) -> Result<String, String> {
    let (cmd, arg) = req.split_once(char::is_whitespace).unwrap_or((req, ""));
    let arg = arg.trim();
    let gone = |e: WorkerError| e.to_string();
    let names = sw.on(0, |n| n.port_map()).map_err(gone)?;
    match cmd {
        "add-port" => {
            let port = parse_port_args(arg).map_err(|e| e.to_string())?;
            sw.add_port(&port)?;
            Ok(String::new())
        }
        "del-port" => {
            let name = arg.to_string();
            let mut answers = sw.on_all(move |n| n.remove_port(&name)).map_err(gone)?;
            answers.swap_remove(0)?;
            Ok(String::new())
        }
        "show" => {
            let mut s = format!("node {}\n", sw.name);
            let ports = sw
                .on(0, |n| {
                    n.ports()
                        .map(|(name, ofport, kind, _)| format!(" {ofport}({name}): {kind}\n"))
                        .collect::<String>()
                })
                .map_err(gone)?;
            s.push_str(&ports);
            if sw.workers() > 1 {
                s.push_str(&format!(" workers: {}\n", sw.workers()));
            }
            Ok(s)
        }
        "dump-flows" if arg == "--datapath" => on_dpif(sw, |d| d.flow_dump()),
        "del-flows" if arg == "--datapath" => on_dpif(sw, |d| d.flow_flush().map(|()| String::new())),
        "dump-flows" => {
            // The rules as worker 0 has them; counters summed over workers
            // (every worker got the same rules in the same order).
            let per = sw
                .on_all(|n| {
                    n.classifier
                        .rules()
                        .map(|r| (r.packets, r.bytes))
                        .collect::<Vec<_>>()
                })
                .map_err(gone)?;
            let rules = sw
                .on(0, move |n| {
                    let now = n.uptime_ns();
                    n.classifier
                        .rules()
                        .map(|r| {
                            let secs = now.saturating_sub(r.added) as f64 / 1e9;
                            (r.flow.cookie, secs, r.flow.table, format_flow(&r.flow, &names))
                        })
                        .collect::<Vec<_>>()
                })
                .map_err(gone)?;
            let mut s = String::new();
            for (i, (cookie, secs, table, text)) in rules.into_iter().enumerate() {
                let (packets, bytes) = per
                    .iter()
                    .filter_map(|w| w.get(i))
                    .fold((0, 0), |(p, b), (wp, wb)| (p + wp, b + wb));
                s.push_str(&format!(
                    " cookie={cookie:#x}, duration={secs:.3}s, table={table}, n_packets={packets}, n_bytes={bytes}, {text}\n"
                ));
            }
            Ok(s)
        }
        "add-flow" => {
            let rule = parse_flow(arg, &names).map_err(|e| e.to_string())?;
            let replaced = sw
                .on_all(move |n| {
                    let now = n.uptime_ns();
                    let replaced = n.classifier.add(rule.clone(), now);
                    n.revalidate();
                    replaced
                })
                .map_err(gone)?;
            Ok(if replaced.first().copied().unwrap_or(false) {
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
                let r = parse_flow(&format!("{text} actions=drop"), &names)
                    .map_err(|e| e.to_string())?;
                let has_table = text.contains("table=");
                (
                    has_table.then_some(r.table),
                    r.m,
                    strict.then_some(r.priority),
                )
            };
            let n = sw
                .on_all(move |n| {
                    let deleted = n.classifier.delete(table, &m, prio);
                    n.revalidate();
                    deleted
                })
                .map_err(gone)?;
            Ok(format!("deleted {} rules\n", n.first().copied().unwrap_or(0)))
        }
        "stats" if arg == "--cycles" => {
            let tables = sw.on_all(|n| n.profile.table()).map_err(gone)?;
            if tables.len() == 1 {
                return Ok(tables.concat());
            }
            Ok(tables
                .iter()
                .enumerate()
                .map(|(i, t)| format!("worker {i}: {t}"))
                .collect())
        }
        "cycles" => {
            let on = match arg {
                "on" => true,
                "off" => false,
                other => return Err(format!("cycles takes 'on' or 'off', not '{other}'")),
            };
            sw.on_all(move |n| n.profile.set(on)).map_err(gone)?;
            Ok(if on {
                "cycles: on, counting from zero\n".into()
            } else {
                "cycles: off\n".into()
            })
        }
        "stats" if !arg.is_empty() => Err(format!("stats takes nothing or --cycles, not '{arg}'")),
        "stats" => {
            let st = NodeStats::sum(&sw.on_all(|n| n.snapshot()).map_err(gone)?);
            let mut s = String::new();
            for p in &st.ports {
                let (name, ofport, kind, st) = (&p.name, p.ofport, p.kind, p.stats);
                s.push_str(&format!(
                    "port {ofport} {name} ({kind}): rx {} pkts {} bytes, tx {} pkts {} bytes, tx errors {}\n",
                    st.rx_packets, st.rx_bytes, st.tx_packets, st.tx_bytes, st.tx_errors
                ));
                if p.queue_rx.len() > 1 {
                    let per: Vec<String> = p.queue_rx.iter().map(u64::to_string).collect();
                    s.push_str(&format!("  rx per queue: {}\n", per.join(" ")));
                }
            }
            let mut drops: Vec<_> = st.drops.iter().collect();
            drops.sort();
            for (why, n) in drops {
                s.push_str(&format!("dropped {why}: {n}\n"));
            }
            let mut frag: Vec<_> = st.outer_fragmented.iter().collect();
            frag.sort();
            for (kind, n) in frag {
                s.push_str(&format!("sent in fragmented outer packets ({kind}): {n}\n"));
            }
            let (hits, misses) = st.cache;
            s.push_str(&format!(
                "exact-match cache: {hits} hits, {misses} misses\n"
            ));
            let kernel = sw
                .on(0, |n| n.dpif.as_ref().map(|d| d.stats()))
                .map_err(gone)?;
            for (name, v) in kernel.into_iter().flatten() {
                s.push_str(&format!("{name}: {v}\n"));
            }
            Ok(s)
        }
        "" => {
            Err("empty request (show, add-port NAME KEY=VALUE..., del-port NAME, dump-flows [--datapath], add-flow RULE, del-flows [--datapath | MATCH], stats [--cycles], cycles on|off)".into())
        }
        other => Err(format!(
            "unknown request '{other}' (show, add-port NAME KEY=VALUE..., del-port NAME, dump-flows [--datapath], add-flow RULE, del-flows [--datapath | MATCH], stats [--cycles], cycles on|off)"
        )),
    }
}

/// Run `f` on the caching datapath under worker 0 (the one that holds
/// it), or say that this node has none.
fn on_dpif(
    sw: &Switch,
    f: impl FnOnce(&mut dyn crate::dpif::Dpif) -> Result<String, String> + Send + 'static,
) -> Result<String, String> {
    sw.on(0, |n| match n.dpif.as_deref_mut() {
        Some(d) => f(d),
        None => Err("this node runs the userspace datapath (no kernel flow cache)".into()),
    })
    .map_err(|e| e.to_string())?
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
