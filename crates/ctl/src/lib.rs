//! The control protocol of a tunlab node, shared by the switch (which
//! serves it), `tunlab ctl`, the lab and the tests (which ask).
//!
//! A client connects to the node's unix socket, sends one request line
//! (`show`, `stats`, `add-flow RULE`, ...; `add-flows LEN` is followed by
//! LEN bytes of rules) and reads one reply: `OK` or `ERROR` on its own
//! line, then the text. `stats --json` answers with [`Stats`] as JSON, so
//! that programs read the counters without parsing the text that people
//! read ([`Stats::text`] prints that text).
//!
//! This crate is the protocol only: it has no switch in it, so whatever
//! talks to a node depends on this and not on the datapaths.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// The longest request line the socket reads.
pub const MAX_REQUEST_LINE: usize = 64 * 1024;
/// The largest `add-flows` body: about a million rules of 100 bytes.
pub const MAX_FLOWS_BODY: usize = 128 << 20;
/// How long a client has to send its request line.
pub const LINE_DEADLINE: Duration = Duration::from_millis(500);
/// How long a client has to send an `add-flows` body.
pub const BODY_DEADLINE: Duration = Duration::from_secs(30);
/// How long a client waits for the answer to a one-line request.
pub const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// Send one request line; (accepted, the reply's text).
pub fn request(path: &Path, req: &str) -> std::io::Result<(bool, String)> {
    exchange(path, format!("{req}\n").as_bytes(), ANSWER_WAIT)
}

/// Send the rules of a file (its text) as one `add-flows` request.
pub fn request_add_flows(path: &Path, rules: &str) -> std::io::Result<(bool, String)> {
    let mut msg = format!("add-flows {}\n", rules.len()).into_bytes();
    msg.extend_from_slice(rules.as_bytes());
    exchange(path, &msg, BODY_DEADLINE + Duration::from_secs(30))
}

/// Why [`stats`] got no statistics.
#[derive(Debug)]
pub enum StatsError {
    /// The socket could not be reached or read.
    Io(std::io::Error),
    /// The node refused the request (its words).
    Refused(String),
    /// The reply is not the statistics' JSON (what serde said).
    Reply(String),
}

impl std::fmt::Display for StatsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatsError::Io(e) => write!(f, "control socket: {e}"),
            StatsError::Refused(why) => write!(f, "stats refused: {}", why.trim()),
            StatsError::Reply(why) => write!(f, "stats reply: {why}"),
        }
    }
}

impl std::error::Error for StatsError {}

/// A node's statistics (`stats --json`).
pub fn stats(path: &Path) -> Result<Stats, StatsError> {
    match request(path, "stats --json") {
        Ok((true, body)) => Stats::from_json(&body).map_err(StatsError::Reply),
        Ok((false, why)) => Err(StatsError::Refused(why)),
        Err(e) => Err(StatsError::Io(e)),
    }
}

fn exchange(path: &Path, msg: &[u8], wait: Duration) -> std::io::Result<(bool, String)> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(wait))?;
    // A refused request may be answered before all of it is sent: read
    // the answer even if the rest cannot be written.
    let sent = s.write_all(msg);
    let mut reply = String::new();
    let read = std::io::Read::read_to_string(&mut s, &mut reply);
    if reply.is_empty() {
        sent?;
        read?;
    }
    Ok(parse_reply(&reply))
}

/// A reply's verdict and text.
pub fn parse_reply(reply: &str) -> (bool, String) {
    match reply.split_once('\n') {
        Some(("OK", rest)) => (true, rest.to_string()),
        Some(("ERROR", rest)) => (false, rest.to_string()),
        _ => (false, format!("unexpected reply: {reply}")),
    }
}

/// One port's counters: the slow path's summed over workers, plus what a
/// caching datapath forwarded itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRow {
    pub name: String,
    pub ofport: u32,
    /// `tap`, `veth`, `geneve`, ...
    pub kind: String,
    /// Packets as the wire carries them: a super-frame counts its segments.
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    /// Dropped on receive by the kernel datapath.
    pub rx_dropped: u64,
    /// The slow path's own packet and frame counts.
    pub slow_rx_packets: u64,
    pub slow_tx_packets: u64,
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Frames received per TAP queue.
    pub queue_rx: Vec<u64>,
}

/// The revalidator's totals (a node with a flow-caching datapath).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Revalidator {
    pub sweeps: u64,
    pub idle_deleted: u64,
    pub stale_deleted: u64,
    /// Deleted, least recently used first, to keep room in the cache.
    pub evicted: u64,
    /// Entries the last sweep found, and how long it took.
    pub last_seen: u64,
    pub last_sweep_ms: f64,
}

/// A node's counters at one moment (`tunlab ctl stats`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub ports: Vec<PortRow>,
    /// Packets the slow path dropped, by reason.
    pub drops: BTreeMap<String, u64>,
    /// Packets sent in fragmented outer packets, by tunnel kind.
    pub outer_fragmented: BTreeMap<String, u64>,
    /// The slow path's exact-match cache.
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// The caching datapath's counters (`kernel_hits`, ...), in its order.
    pub datapath: Vec<(String, u64)>,
    pub revalidator: Option<Revalidator>,
    /// OpenFlow connections refused, by reason (`tls`).
    #[serde(default)]
    pub openflow_refused: BTreeMap<String, u64>,
}

impl Stats {
    /// Read the JSON form.
    pub fn from_json(s: &str) -> Result<Stats, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }

    /// The JSON form (one line).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A datapath counter (`kernel_hits`) or a drop reason as `dropped
    /// REASON`; 0 when the node has none.
    pub fn counter(&self, name: &str) -> u64 {
        if let Some(reason) = name.strip_prefix("dropped ") {
            return self.drops.get(reason).copied().unwrap_or(0);
        }
        self.datapath
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }

    /// Packets received and sent over every port.
    pub fn port_totals(&self) -> (u64, u64) {
        self.ports
            .iter()
            .fold((0, 0), |(rx, tx), p| (rx + p.rx_packets, tx + p.tx_packets))
    }

    /// Every counter under one name each (`port NAME rx`, `port NAME tx`,
    /// `dropped REASON`, the datapath's, `exact-match cache hits`), for
    /// programs that watch how counters move.
    pub fn flat(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for p in &self.ports {
            m.insert(format!("port {} rx", p.name), p.rx_packets);
            m.insert(format!("port {} tx", p.name), p.tx_packets);
        }
        for (why, n) in &self.drops {
            m.insert(format!("dropped {why}"), *n);
        }
        m.insert("exact-match cache hits".into(), self.cache_hits);
        m.insert("exact-match cache misses".into(), self.cache_misses);
        for (name, v) in &self.datapath {
            m.insert(name.clone(), *v);
        }
        for (why, n) in &self.openflow_refused {
            m.insert(format!("openflow refused {why}"), *n);
        }
        m
    }

    /// The text `tunlab ctl stats` prints.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for p in &self.ports {
            // The kernel's receive drops only when there are some:
            // "dropped" in the stats means something was.
            let drops = match p.rx_dropped {
                0 => String::new(),
                n => format!(", rx dropped {n} (kernel)"),
            };
            // Packets count segments; where the slow path moved
            // super-frames, how many frames it read and wrote.
            let frames = if (p.rx_frames, p.tx_frames) != (p.slow_rx_packets, p.slow_tx_packets) {
                format!(", slow path frames rx {} tx {}", p.rx_frames, p.tx_frames)
            } else {
                String::new()
            };
            s.push_str(&format!(
                "port {} {} ({}): rx {} pkts {} bytes, tx {} pkts {} bytes, tx errors {}{drops}{frames}\n",
                p.ofport, p.name, p.kind, p.rx_packets, p.rx_bytes, p.tx_packets, p.tx_bytes, p.tx_errors,
            ));
            if p.queue_rx.len() > 1 {
                let per: Vec<String> = p.queue_rx.iter().map(u64::to_string).collect();
                s.push_str(&format!("  rx per queue: {}\n", per.join(" ")));
            }
        }
        for (why, n) in &self.drops {
            s.push_str(&format!("dropped {why}: {n}\n"));
        }
        for (kind, n) in &self.outer_fragmented {
            s.push_str(&format!("sent in fragmented outer packets ({kind}): {n}\n"));
        }
        s.push_str(&format!(
            "exact-match cache: {} hits, {} misses\n",
            self.cache_hits, self.cache_misses
        ));
        for (name, v) in &self.datapath {
            s.push_str(&format!("{name}: {v}\n"));
        }
        if let Some(r) = &self.revalidator {
            s.push_str(&format!(
                "revalidator: {} sweeps, deleted {} idle and {} stale flows, evicted {} (cache nearly full); last sweep saw {} flows in {:.1} ms\n",
                r.sweeps, r.idle_deleted, r.stale_deleted, r.evicted, r.last_seen, r.last_sweep_ms
            ));
        }
        for (why, n) in &self.openflow_refused {
            s.push_str(&format!("OpenFlow connections refused ({why}): {n}\n"));
        }
        s
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Stats {
        Stats {
            ports: vec![PortRow {
                name: "tap0".into(),
                ofport: 1,
                kind: "tap".into(),
                rx_packets: 10,
                rx_bytes: 1000,
                tx_packets: 7,
                tx_bytes: 700,
                slow_rx_packets: 4,
                slow_tx_packets: 7,
                rx_frames: 2,
                tx_frames: 7,
                queue_rx: vec![1, 1],
                ..PortRow::default()
            }],
            drops: [("no_rule".to_string(), 3)].into_iter().collect(),
            cache_hits: 5,
            cache_misses: 2,
            datapath: vec![("kernel_hits".into(), 42), ("kernel_installed".into(), 1)],
            revalidator: Some(Revalidator {
                sweeps: 2,
                last_seen: 1,
                last_sweep_ms: 0.25,
                ..Revalidator::default()
            }),
            ..Stats::default()
        }
    }

    #[test]
    fn the_json_form_reads_back_as_it_was_written() {
        let s = example();
        assert_eq!(Stats::from_json(&s.to_json()), Ok(s));
        assert!(Stats::from_json("port 1 tap0").is_err());
    }

    #[test]
    fn counters_are_found_by_the_names_the_text_prints() {
        let s = example();
        assert_eq!(s.counter("kernel_hits"), 42);
        assert_eq!(s.counter("dropped no_rule"), 3);
        assert_eq!(s.counter("kernel_missing"), 0);
        assert_eq!(s.port_totals(), (10, 7));
        let flat = s.flat();
        assert_eq!(flat["port tap0 rx"], 10);
        assert_eq!(flat["dropped no_rule"], 3);
        let text = s.text();
        assert!(text.starts_with(
            "port 1 tap0 (tap): rx 10 pkts 1000 bytes, tx 7 pkts 700 bytes, tx errors 0, slow path frames rx 2 tx 7\n  rx per queue: 1 1\n"
        ), "{text}");
        assert!(text.contains(
            "dropped no_rule: 3\nexact-match cache: 5 hits, 2 misses\nkernel_hits: 42\n"
        ));
        assert!(
            text.ends_with("last sweep saw 1 flows in 0.2 ms\n")
                || text.ends_with("last sweep saw 1 flows in 0.3 ms\n"),
            "{text}"
        );
    }

    #[test]
    fn replies_are_read_by_their_first_line() {
        assert_eq!(parse_reply("OK\nfine\n"), (true, "fine\n".into()));
        assert_eq!(parse_reply("ERROR\nno\n"), (false, "no\n".into()));
        assert!(!parse_reply("garbage").0);
    }
}
