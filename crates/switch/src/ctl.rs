//! The control socket: `tunlab ctl` talks to a running node over a unix
//! socket, one request, one reply, in the spirit of ovs-ofctl /
//! ovs-appctl.
//!
//! Requests: `show`, `add-port NAME KEY=VALUE...` (the keys of a
//! `[[port]]` table), `del-port NAME`, `dump-flows`, `add-flow RULE`,
//! `add-flows LEN` followed by LEN bytes of rules (one per line, as
//! `ovs-ofctl add-flows FILE` reads them), `del-flows [MATCH]`,
//! `del-flows --strict RULE-MATCH`, `dump-flows --datapath` and
//! `del-flows --datapath` (the datapath's cached flows, as `ovs-dpctl
//! dump-flows` / `del-flows`: the kernel's megaflows, or the userspace
//! datapath's exact-match flows of every worker), `stats`, `stats --cycles` and
//! `cycles on|off` (time per stage). A reply starts with `OK` or `ERROR`
//! on its own line; a rejected rule, rule file or port leaves the node as
//! it was. Served by the node's main thread, which reaches the packet
//! workers by message (`workers`), so a slow or hostile client delays
//! other clients, never packets.
//!
//! Access: the socket is mode 0600 (0660 and owned by `control_group` when
//! the config names one), and each client's credentials are checked again
//! on accept (SO_PEERCRED): root, the switch's own user, or a member of
//! the control group. Requests are bounded: a line of at most
//! [`MAX_REQUEST_LINE`] bytes within [`LINE_DEADLINE`], an `add-flows`
//! body of at most [`MAX_FLOWS_BODY`] bytes within [`BODY_DEADLINE`];
//! anything else gets an error naming what was wrong.

use crate::access::{bind_socket, check_peer};
use crate::api::ApiError;
use crate::config::parse_port_args;
use crate::workers::{Switch, WorkerError};
use nix::unistd::Gid;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tunlab_dp::{format_flow, parse_flow, PortNames, Selector, DEFAULT_PRIORITY};

pub use tunlab_ctl::{BODY_DEADLINE, LINE_DEADLINE, MAX_FLOWS_BODY, MAX_REQUEST_LINE};

/// The listening side, owned by the node's loop.
#[derive(Debug)]
pub struct CtlServer {
    listener: UnixListener,
    path: PathBuf,
    group: Option<Gid>,
}

impl CtlServer {
    /// Listen at `path`, mode 0600, or 0660 and owned by `group` when one
    /// is named. A stale socket file (nobody answers) is replaced; a live
    /// one is an error.
    pub fn bind(path: &Path, group: Option<&str>) -> std::io::Result<CtlServer> {
        let (listener, group) = bind_socket(path, group)?;
        Ok(CtlServer {
            listener,
            path: path.to_path_buf(),
            group,
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

    /// Serve every waiting client (each sends one request).
    pub fn serve(&self, sw: &mut Switch) {
        while let Ok((stream, _)) = self.listener.accept() {
            let _ = serve_one(stream, sw, self.group);
        }
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Why no more bytes came.
enum Short {
    /// Nothing by the deadline.
    Late,
    /// The client closed its side.
    Ended,
    Io(String),
}

/// Wait until bytes are buffered (at most until `deadline`) and return
/// them; consume what you use.
fn fill<'a>(r: &'a mut BufReader<&UnixStream>, deadline: Instant) -> Result<&'a [u8], Short> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Short::Late);
    }
    r.get_ref()
        .set_read_timeout(Some(left))
        .map_err(|e| Short::Io(e.to_string()))?;
    match r.fill_buf() {
        Ok([]) => Err(Short::Ended),
        Ok(b) => Ok(b),
        Err(e) if is_timeout(&e) => Err(Short::Late),
        Err(e) => Err(Short::Io(e.to_string())),
    }
}

/// Read bytes up to a newline, at most [`MAX_REQUEST_LINE`], by `deadline`.
fn read_line(r: &mut BufReader<&UnixStream>, deadline: Instant) -> Result<String, String> {
    let mut line = Vec::new();
    loop {
        let buf = fill(r, deadline).map_err(|why| match why {
            Short::Late => format!(
                "incomplete request: {} bytes and no end of line within {} ms",
                line.len(),
                LINE_DEADLINE.as_millis()
            ),
            Short::Ended => format!(
                "request ended after {} bytes without an end of line (half-written?)",
                line.len()
            ),
            Short::Io(e) => format!("reading the request: {e}"),
        })?;
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        r.consume(take + done as usize);
        if line.len() > MAX_REQUEST_LINE {
            return Err(format!(
                "request line longer than {MAX_REQUEST_LINE} bytes (rule files go through add-flows)"
            ));
        }
        if done {
            return String::from_utf8(line).map_err(|e| {
                format!(
                    "request is not UTF-8 text (bad byte at offset {})",
                    e.utf8_error().valid_up_to()
                )
            });
        }
    }
}

/// Read exactly `len` bytes of body by `deadline`.
fn read_body(
    r: &mut BufReader<&UnixStream>,
    len: usize,
    deadline: Instant,
) -> Result<String, String> {
    let mut body = Vec::with_capacity(len);
    while body.len() < len {
        let buf = fill(r, deadline).map_err(|why| match why {
            Short::Late => format!(
                "incomplete add-flows body: {} of {len} bytes within {} s",
                body.len(),
                BODY_DEADLINE.as_secs()
            ),
            Short::Ended => format!("add-flows body ended after {} of {len} bytes", body.len()),
            Short::Io(e) => format!("reading the add-flows body: {e}"),
        })?;
        let take = buf.len().min(len - body.len());
        body.extend_from_slice(&buf[..take]);
        r.consume(take);
    }
    String::from_utf8(body).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        format!("rule file is not UTF-8 text (line {line})")
    })
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

fn serve_one(stream: UnixStream, sw: &mut Switch, group: Option<Gid>) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    let outcome = (|| {
        // The line first, so that a refused client has sent what it meant
        // to and reads the refusal (not a reset) in return.
        let mut r = BufReader::new(&stream);
        let line = read_line(&mut r, Instant::now() + LINE_DEADLINE);
        check_peer(&stream, group)?;
        let line = line?;
        let line = line.trim();
        match line.split_once(char::is_whitespace) {
            Some(("add-flows", len)) => {
                let len: usize = len
                    .trim()
                    .parse()
                    .map_err(|_| format!("add-flows takes a byte count, not '{}'", len.trim()))?;
                if len > MAX_FLOWS_BODY {
                    return Err(format!(
                        "add-flows body of {len} bytes is over the limit of {MAX_FLOWS_BODY}"
                    ));
                }
                let body = read_body(&mut r, len, Instant::now() + BODY_DEADLINE)?;
                add_flows(&body, sw)
            }
            _ => handle(line, sw),
        }
    })();
    let reply = match outcome {
        Ok(text) => format!("OK\n{text}"),
        Err(text) => format!("ERROR\n{text}\n"),
    };
    stream.set_write_timeout(Some(Duration::from_secs(1)))?;
    (&stream).write_all(reply.as_bytes())?;
    // Closing a unix socket with unread input resets the client's side,
    // which can then lose the reply: take what it already sent (a refused
    // request is often unread) without waiting for more.
    stream.shutdown(std::net::Shutdown::Write)?;
    stream.set_nonblocking(true)?;
    let mut scratch = [0u8; 16 * 1024];
    for _ in 0..64 {
        match std::io::Read::read(&mut &stream, &mut scratch) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    Ok(())
}

/// `add-flows`: every rule of `text`, one per line (blank lines and `#`
/// comments skipped), all or none: one bad line rejects the file, naming
/// the line. The workers get the rules in one message each and
/// revalidate once.
pub fn add_flows(text: &str, sw: &mut Switch) -> Result<String, String> {
    let t0 = Instant::now();
    let names = sw.port_map().map_err(|e| e.to_string())?;
    let mut rules = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        rules.push(parse_flow(line, &names).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    let parsed = t0.elapsed();
    let n = rules.len();
    let replaced = sw.add_flows(rules).map_err(|e| e.to_string())?;
    let total = t0.elapsed();
    Ok(format!(
        "added {n} rules ({replaced} replaced existing ones) in {:.3} s (parse {:.3} s, install {:.3} s)\n",
        total.as_secs_f64(),
        parsed.as_secs_f64(),
        (total - parsed).as_secs_f64()
    ))
}

/// What the requests are, for a request that is none of them.
const REQUESTS: &str = "show, add-port NAME KEY=VALUE..., del-port NAME, dump-flows [--datapath], add-flow RULE, add-flows LEN + rules, del-flows [--datapath | [--strict] MATCH], mod-flows [--strict] MATCH actions=..., trace FLOW [--ct-next STATES]..., stats [--json | --cycles], cycles on|off, flow-restore-wait [off]";

/// `trace FLOW`: the packet FLOW describes (ovs-ofctl's match syntax,
/// `in_port=1,icmp,nw_ttl=64`; fields it leaves out are 0) through the
/// tables, as `ovs-appctl ofproto/trace` prints it. Nothing is counted
/// against the rules and no packet is sent.
fn trace(arg: &str, sw: &mut Switch) -> Result<String, String> {
    if arg.is_empty() {
        return Err(
            "trace FLOW: give the packet, e.g. trace in_port=1,icmp,nw_src=10.0.0.1,nw_ttl=64"
                .into(),
        );
    }
    // `--ct-next FLAGS` (or `--ct-next=FLAGS`), any number of times: the
    // conntrack state of each recirculation in turn.
    let mut flow = Vec::new();
    let mut ct_next = Vec::new();
    let mut words = arg.split_whitespace();
    while let Some(w) = words.next() {
        let flags = if w == "--ct-next" {
            words
                .next()
                .ok_or("trace: --ct-next needs the states, e.g. --ct-next trk,new")?
        } else if let Some(v) = w.strip_prefix("--ct-next=") {
            v
        } else if w.starts_with("--") {
            return Err(format!("trace: unknown option {w} (--ct-next FLAGS)"));
        } else {
            flow.push(w);
            continue;
        };
        ct_next.push(tunlab_dp::pipeline::parse_ct_state(flags)?);
    }
    let names = sw.port_map().map_err(|e| e.to_string())?;
    let key = parse_flow(&format!("{} actions=drop", flow.join(" ")), &names)
        .map_err(|e| e.to_string())?
        .m
        .value;
    let name = sw.name.clone();
    sw.on(0, move |n| n.ofproto.trace(&key, &name, &ct_next))
        .map_err(|e| e.to_string())
}

/// Carry out one request; the text of the reply.
pub fn handle(req: &str, sw: &mut Switch) -> Result<String, String> {
    let (cmd, arg) = req.split_once(char::is_whitespace).unwrap_or((req, ""));
    let arg = arg.trim();
    let api = |e: ApiError| e.to_string();
    match cmd {
        "add-port" => {
            let port = parse_port_args(arg).map_err(|e| e.to_string())?;
            sw.add_port(&port)?;
            Ok(String::new())
        }
        "del-port" => sw.del_port(arg).map(|()| String::new()).map_err(api),
        "show" => show(sw),
        "flow-restore-wait" => flow_restore_wait(arg, sw),
        "dump-flows" if arg == "--datapath" => sw
            .on_dpif(|d| d.flow_dump())
            .map(|dumps| dumps.concat())
            .map_err(api),
        "del-flows" if arg == "--datapath" => sw
            .on_dpif(|d| d.flow_flush())
            .map(|_| String::new())
            .map_err(api),
        "dump-flows" => dump_flows(sw),
        "add-flow" => {
            let names = sw.port_map().map_err(api)?;
            let rule = parse_flow(arg, &names).map_err(|e| e.to_string())?;
            Ok(match sw.add_flows(vec![rule]).map_err(api)? {
                0 => String::new(),
                _ => "replaced an existing rule\n".into(),
            })
        }
        "del-flows" => {
            let names = sw.port_map().map_err(api)?;
            let n = sw.del_flows(selector(arg, &names)?).map_err(api)?;
            Ok(format!("deleted {n} rules\n"))
        }
        "mod-flows" => mod_flows(arg, sw),
        "trace" => trace(arg, sw),
        "stats" | "cycles" => cycles_and_stats(cmd, arg, sw),
        "add-flows" => Err(
            "add-flows needs the byte count of the rules that follow (tunlab ctl add-flows FILE sends them)".into(),
        ),
        "" => Err(format!("empty request ({REQUESTS})")),
        other => Err(format!("unknown request '{other}' ({REQUESTS})")),
    }
}

/// `show`: the node, its ports and workers.
fn show(sw: &Switch) -> Result<String, String> {
    let mut s = format!("node {}\n", sw.name);
    let ports = sw
        .on(0, |n| {
            n.netdev
                .ports()
                .map(|(name, ofport, kind, _)| format!(" {ofport}({name}): {kind}\n"))
                .collect::<String>()
        })
        .map_err(|e| e.to_string())?;
    s.push_str(&ports);
    if sw.workers() > 1 {
        s.push_str(&format!(" workers: {}\n", sw.workers()));
    }
    Ok(s)
}

/// `flow-restore-wait [off]`.
fn flow_restore_wait(arg: &str, sw: &mut Switch) -> Result<String, String> {
    match arg {
        "off" | "false" => {
            let was = sw.restore_waiting();
            sw.restore_done().map_err(|e| e.to_string())?;
            Ok(if was {
                "flow-restore-wait off: the cached flows are revalidated against the rules loaded, misses are handled again\n".into()
            } else {
                "flow-restore-wait was already off\n".into()
            })
        }
        "" => Ok(format!(
            "flow-restore-wait {}\n",
            if sw.restore_waiting() { "on" } else { "off" }
        )),
        other => Err(format!(
            "flow-restore-wait {other}: takes off (it is turned on only at start, by switch.flow_restore_wait = true)"
        )),
    }
}

/// `dump-flows`: every rule with its counters, as ovs-ofctl prints them.
fn dump_flows(sw: &Switch) -> Result<String, String> {
    let names = sw.port_map().map_err(|e| e.to_string())?;
    let mut s = String::new();
    for mut e in sw.flows().map_err(|e| e.to_string())? {
        // The cookie and table lead the line; the rule's text need not
        // repeat them.
        let cookie = std::mem::take(&mut e.flow.cookie);
        let table = std::mem::take(&mut e.flow.table);
        s.push_str(&format!(
            " cookie={:#x}, duration={:.3}s, table={}, n_packets={}, n_bytes={}, {}\n",
            cookie,
            e.age_ns as f64 / 1e9,
            table,
            e.packets,
            e.bytes,
            format_flow(&e.flow, &names)
        ));
    }
    Ok(s)
}

/// `mod-flows [--strict] MATCH actions=ACTIONS` (ovs-ofctl's form: the
/// selecting match, then the new actions).
fn mod_flows(arg: &str, sw: &Switch) -> Result<String, String> {
    let Some((sel_text, acts)) = arg.split_once("actions=") else {
        return Err(format!(
            "mod-flows needs the new actions: mod-flows [--strict] MATCH actions=ACTIONS, not '{arg}'"
        ));
    };
    let names = sw.port_map().map_err(|e| e.to_string())?;
    let sel = selector(sel_text.trim().trim_end_matches(','), &names)?;
    let actions = parse_flow(&format!("actions={acts}"), &names)
        .map_err(|e| e.to_string())?
        .actions;
    let n = sw.mod_flows(sel, actions).map_err(|e| e.to_string())?;
    Ok(format!("modified {n} rules\n"))
}

/// `stats [--json | --cycles]` and `cycles on|off`.
fn cycles_and_stats(cmd: &str, arg: &str, sw: &Switch) -> Result<String, String> {
    let gone = |e: WorkerError| e.to_string();
    match (cmd, arg) {
        ("stats", "--cycles") => {
            let tables = sw.on_all(|n| n.netdev.profile.table()).map_err(gone)?;
            if tables.len() == 1 {
                return Ok(tables.concat());
            }
            Ok(tables
                .iter()
                .enumerate()
                .map(|(i, t)| format!("worker {i}: {t}"))
                .collect())
        }
        ("stats", "--json") => Ok(sw.stats().map_err(|e| e.to_string())?.to_json() + "\n"),
        ("stats", "") => Ok(sw.stats().map_err(|e| e.to_string())?.text()),
        ("stats", other) => Err(format!(
            "stats takes nothing, --json or --cycles, not '{other}'"
        )),
        (_, "on" | "off") => {
            let on = arg == "on";
            sw.on_all(move |n| n.netdev.profile.set(on)).map_err(gone)?;
            Ok(if on {
                "cycles: on, counting from zero\n".into()
            } else {
                "cycles: off\n".into()
            })
        }
        (_, other) => Err(format!("cycles takes 'on' or 'off', not '{other}'")),
    }
}

/// The rules a del-flows or mod-flows request means: `[--strict] MATCH`
/// in ovs-ofctl's words, where a `cookie=VALUE/MASK` picks by cookie and
/// `table=N` limits to one table (all tables otherwise).
pub(crate) fn selector(arg: &str, names: &dyn PortNames) -> Result<Selector, String> {
    let (strict, text) = match arg.strip_prefix("--strict") {
        Some(rest) => (true, rest.trim()),
        None => (false, arg),
    };
    let mut cookie = None;
    let mut rest = Vec::new();
    for field in text.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        match field.strip_prefix("cookie=") {
            Some(c) => {
                let (v, m) = c.split_once('/').unwrap_or((c, "-1"));
                let num = |t: &str| -> Result<u64, String> {
                    let r = match t.strip_prefix("0x") {
                        _ if t == "-1" => Ok(u64::MAX),
                        Some(h) => u64::from_str_radix(h, 16),
                        None => t.parse(),
                    };
                    r.map_err(|_| format!("cookie: '{t}' is not a number (cookie=VALUE/MASK)"))
                };
                cookie = Some((num(v)?, num(m)?));
            }
            None => rest.push(field),
        }
    }
    let text = rest.join(",");
    if text.is_empty() {
        return Ok(Selector {
            strict: strict.then_some(DEFAULT_PRIORITY),
            cookie,
            ..Selector::default()
        });
    }
    let r = parse_flow(&format!("{text} actions=drop"), names).map_err(|e| e.to_string())?;
    Ok(Selector {
        table: text.contains("table=").then_some(r.table),
        m: r.m,
        strict: strict.then_some(r.priority),
        cookie,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tunlab_ctl::{request, request_add_flows};

    /// A one-worker node without ports, its control socket served by a
    /// thread until the returned guard is dropped.
    struct Served {
        path: PathBuf,
        stop: Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Drop for Served {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    fn serve(name: &str, group: Option<&str>) -> Served {
        let path =
            std::env::temp_dir().join(format!("tunlab-ctl-{}-{name}.sock", std::process::id()));
        let cfg = config::parse("[switch]\nname = \"t\"\n", "t.toml").unwrap();
        let mut sw = Switch::start(&cfg).unwrap();
        let ctl = CtlServer::bind(&path, group).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                if ctl.wait(20) {
                    ctl.serve(&mut sw);
                }
            }
            drop(ctl);
            sw.stop();
        });
        Served {
            path,
            stop,
            thread: Some(thread),
        }
    }

    /// Send raw bytes, optionally keep the connection open without
    /// finishing; the whole reply.
    fn raw(path: &Path, bytes: &[u8], then_close: bool) -> String {
        let mut s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(bytes);
        if then_close {
            let _ = s.shutdown(std::net::Shutdown::Write);
        }
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        reply
    }

    #[test]
    fn add_flows_is_all_or_nothing_and_says_how_long() {
        let srv = serve("addflows", None);
        let good = "# two tenants\npriority=10,in_port=1 actions=output:2\n\nin_port=2,dl_vlan=5 actions=pop_vlan,output:1\n";
        let bad = format!("{good}in_port=3 actions=frobnicate\n");
        let (ok, text) = request_add_flows(&srv.path, &bad).unwrap();
        assert!(
            !ok && text.contains("line 5") && text.contains("frobnicate"),
            "{text}"
        );
        let (_, dump) = request(&srv.path, "dump-flows").unwrap();
        assert_eq!(dump, "", "a rejected file adds nothing");
        let (ok, text) = request_add_flows(&srv.path, good).unwrap();
        assert!(
            ok && text.starts_with("added 2 rules (0 replaced existing ones) in "),
            "{text}"
        );
        let (ok, text) = request_add_flows(&srv.path, good).unwrap();
        assert!(
            ok && text.starts_with("added 2 rules (2 replaced"),
            "{text}"
        );
        let (_, dump) = request(&srv.path, "dump-flows").unwrap();
        assert_eq!(dump.lines().count(), 2, "{dump}");
    }

    #[test]
    fn stats_as_text_and_as_json_say_the_same() {
        let srv = serve("stats", None);
        let st = tunlab_ctl::stats(&srv.path).unwrap();
        let (ok, text) = request(&srv.path, "stats").unwrap();
        assert!(ok, "{text}");
        // A switch without ports: counters move only with packets, and
        // none flow here.
        assert_eq!(st.text(), text);
        assert!(
            text.contains("exact-match cache: 0 hits, 0 misses"),
            "{text}"
        );
        let (ok, why) = request(&srv.path, "stats --yaml").unwrap();
        assert!(!ok && why.contains("--json"), "{why}");
    }

    #[test]
    fn bad_requests_get_an_error_naming_what_is_wrong() {
        let srv = serve("bad", None);
        let cases: Vec<(Vec<u8>, bool, &str)> = vec![
            (b"\xff\xfe garbage\n".to_vec(), false, "not UTF-8"),
            (
                vec![b'a'; MAX_REQUEST_LINE + 10],
                false,
                "longer than 65536 bytes",
            ),
            (b"sho".to_vec(), false, "incomplete request: 3 bytes"),
            (
                b"show".to_vec(),
                true,
                "ended after 4 bytes without an end of line",
            ),
            (
                b"add-flows\n".to_vec(),
                false,
                "add-flows needs the byte count",
            ),
            (
                b"add-flows lots\n".to_vec(),
                false,
                "byte count, not 'lots'",
            ),
            (
                b"add-flows 999999999999\n".to_vec(),
                false,
                "over the limit",
            ),
            (
                b"add-flows 100\nin_port=1 ".to_vec(),
                true,
                "ended after 10 of 100 bytes",
            ),
            (
                b"add-flows 3\n\xff\xff\xff".to_vec(),
                false,
                "not UTF-8 text (line 1)",
            ),
            (b"\n".to_vec(), false, "empty request"),
            (
                b"add-flow in_port=1 actions=output:99999999999\n".to_vec(),
                false,
                "99999999999",
            ),
        ];
        for (bytes, close, want) in cases {
            let reply = raw(&srv.path, &bytes, close);
            assert!(
                reply.starts_with("ERROR\n") && reply.contains(want),
                "{:?}: {reply}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(40)])
            );
        }
        // And the node still answers.
        assert!(request(&srv.path, "show").unwrap().0);
    }

    /// Run a one-line client as another user; its reply.
    fn as_user(path: &Path, uid: u32, gid: u32) -> String {
        use std::os::unix::process::CommandExt;
        let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.sendall(b'show\\n')\nprint(s.makefile().read(), end='')";
        let out = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(path)
            .uid(uid)
            .gid(gid)
            .output()
            .expect("python3 runs");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }

    #[test]
    fn the_socket_admits_root_and_the_control_group_only() {
        assert_eq!(
            nix::unistd::geteuid().as_raw(),
            0,
            "this test runs as root (as CI does)"
        );
        let srv = serve("perm", None);
        let mode = std::fs::metadata(&srv.path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // The file mode keeps others out...
        let reply = as_user(&srv.path, 65534, 65534);
        assert!(reply.contains("PermissionError"), "{reply}");
        // ... and if someone loosens it, the credential check still does.
        std::fs::set_permissions(&srv.path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let reply = as_user(&srv.path, 65534, 65534);
        assert!(
            reply.starts_with("ERROR\npermission denied: uid 65534 is not root"),
            "{reply}"
        );
        drop(srv);

        let nogroup = nix::unistd::Group::from_gid(Gid::from_raw(65534))
            .unwrap()
            .unwrap();
        let srv = serve("group", Some(&nogroup.name));
        let meta = std::fs::metadata(&srv.path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o660);
        assert_eq!(std::os::unix::fs::MetadataExt::gid(&meta), 65534);
        let reply = as_user(&srv.path, 65533, 65534);
        assert!(reply.starts_with("OK\n"), "{reply}");
        std::fs::set_permissions(&srv.path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let reply = as_user(&srv.path, 65533, 65533);
        assert!(
            reply.contains(
                "uid 65533 (gid 65533) is neither root nor in the control group (gid 65534)"
            ),
            "{reply}"
        );
        assert!(
            CtlServer::bind(Path::new("/tmp/x.sock"), Some("no-such-group-here"))
                .unwrap_err()
                .to_string()
                .contains("'no-such-group-here' is not a group")
        );
    }
}
