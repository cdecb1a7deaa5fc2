//! Prometheus metrics: `GET /metrics` at the address `[switch] metrics`
//! names, in the OpenMetrics text format (prometheus-client's encoder),
//! from the same statistics `tunlab ctl stats` prints. Off by default.
//!
//! Names follow Prometheus's conventions: a `tunlab_` prefix, base units
//! (bytes, seconds), `_total` on counters, and a label for what varies
//! (port, drop reason, lookup result) rather than one name per value. A
//! datapath counter this file does not know yet is still exported, as
//! `tunlab_datapath_events_total{counter="NAME"}`: nothing is lost when a
//! counter is added to the datapath.
//!
//! The server is served from the control thread's poll loop, one short
//! request at a time, as the control socket is: a scrape costs the
//! workers one statistics round trip, as `tunlab ctl stats` does.

use crate::workers::Switch;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;
use tunlab_ctl::{PortRow, Stats};

/// The OpenMetrics text format's content type.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a scraper may take to send its request: the control thread
/// waits for it, so not long.
const REQUEST_DEADLINE: Duration = Duration::from_millis(500);

/// The listening socket of the metrics endpoint.
#[derive(Debug)]
pub struct MetricsServer {
    listener: TcpListener,
    /// Requests answered, and refused (not `GET /metrics`, or too slow).
    pub served: u64,
    pub refused: u64,
}

impl MetricsServer {
    pub fn bind(addr: SocketAddr) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(MetricsServer {
            listener,
            served: 0,
            refused: 0,
        })
    }

    pub fn listener(&self) -> &TcpListener {
        &self.listener
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Answer every connection waiting to be accepted.
    pub fn serve(&mut self, sw: &Switch) {
        while let Ok((stream, _)) = self.listener.accept() {
            match answer(stream, sw) {
                Ok(true) => self.served += 1,
                Ok(false) | Err(_) => self.refused += 1,
            }
        }
    }
}

/// Read one request and answer it; whether it was a scrape.
fn answer(stream: TcpStream, sw: &Switch) -> std::io::Result<bool> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(REQUEST_DEADLINE))?;
    let request = read_head(&stream)?;
    let line = String::from_utf8_lossy(request.split(|&b| b == b'\n').next().unwrap_or(&[]));
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next(), parts.next());
    let (status, kind, body, scrape) = match (method, path) {
        (Some("GET"), Some("/metrics")) => match sw.stats() {
            Ok(st) => ("200 OK", CONTENT_TYPE, render(&st, resident_bytes()), true),
            Err(e) => (
                "503 Service Unavailable",
                "text/plain",
                format!("the switch did not answer: {e}\n"),
                false,
            ),
        },
        (Some("GET"), _) => (
            "404 Not Found",
            "text/plain",
            "tunlab serves /metrics only\n".to_string(),
            false,
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics\n".to_string(),
            false,
        ),
    };
    // One write: a formatted write would go out piece by piece.
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    (&stream).write_all(reply.as_bytes())?;
    Ok(scrape)
}

/// The request's head (its line and headers, whose content does not
/// matter), up to the blank line, [`MAX_HEAD`] bytes or the end of the
/// stream, whichever comes first, all within [`REQUEST_DEADLINE`]: a
/// client that trickles bytes holds the control thread no longer than one
/// that sends nothing.
fn read_head(mut stream: &TcpStream) -> std::io::Result<Vec<u8>> {
    let deadline = std::time::Instant::now() + REQUEST_DEADLINE;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let ended =
        |h: &[u8]| h.windows(4).any(|w| w == b"\r\n\r\n") || h.windows(2).any(|w| w == b"\n\n");
    while head.len() < MAX_HEAD && !ended(&head) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf)? {
            0 => break,
            n => head.extend_from_slice(&buf[..n]),
        }
    }
    Ok(head)
}

/// The most of a request's head read.
const MAX_HEAD: usize = 8192;

/// This process's resident memory (`/proc/self/statm`), in bytes.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(
        pages
            * nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
                .ok()??
                .max(0) as u64,
    )
}

/// The node's statistics in the OpenMetrics text format.
pub fn render(st: &Stats, resident: Option<u64>) -> String {
    let mut registry = Registry::with_prefix("tunlab");
    registry.register_collector(Box::new(Snapshot {
        st: st.clone(),
        resident,
    }));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

/// One scrape's statistics, encoded as metric families.
#[derive(Debug)]
struct Snapshot {
    st: Stats,
    resident: Option<u64>,
}

/// A family of counters, one per label value.
fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    rows: &[(Vec<(&str, &str)>, u64)],
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let kind = ConstCounter::new(0u64).metric_type();
    let mut family = enc.encode_descriptor(name, help, unit, kind)?;
    for (labels, v) in rows {
        ConstCounter::new(*v).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauge(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    v: i64,
) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(enc.encode_descriptor(name, help, unit, g.metric_type())?)
}

/// A caching datapath's counter: the family it goes to, with its labels,
/// or None for a gauge handled elsewhere.
fn datapath_family(name: &str) -> Option<(&'static str, Vec<(&'static str, String)>)> {
    let dp = |d: &str| ("datapath", d.to_string());
    let kernel = name.strip_prefix("kernel_");
    let netdev = name.strip_prefix("netdev_");
    Some(match (kernel, netdev) {
        (Some(r @ ("hit" | "miss" | "stale")), _) => (
            "flow_lookups",
            vec![dp("kernel"), ("result", r.to_string())],
        ),
        (_, Some("flow_hits")) => (
            "flow_lookups",
            vec![dp("userspace"), ("result", "hit".into())],
        ),
        (_, Some("flow_misses")) => (
            "flow_lookups",
            vec![dp("userspace"), ("result", "miss".into())],
        ),
        (Some("upcall"), _) => ("upcalls", vec![dp("kernel")]),
        (Some("installed"), _) | (_, Some("flows_installed")) => (
            "flows_installed",
            vec![dp(if kernel.is_some() {
                "kernel"
            } else {
                "userspace"
            })],
        ),
        (_, Some("flows_not_cached")) => (
            "flows_not_installed",
            vec![dp("userspace"), ("reason", "not_cacheable".into())],
        ),
        (Some(k), _) if k.starts_with("not_installed_") => (
            "flows_not_installed",
            vec![
                dp("kernel"),
                ("reason", k["not_installed_".len()..].to_string()),
            ],
        ),
        (_, Some("flow_evictions")) => ("flow_evictions", vec![dp("userspace")]),
        (Some("changes_revalidated_each_flow"), _) => (
            "revalidations",
            vec![dp("kernel"), ("how", "each_flow".into())],
        ),
        (Some("changes_new_generation"), _) => (
            "revalidations",
            vec![dp("kernel"), ("how", "new_generation".into())],
        ),
        (Some("flows_replaced_in_place"), _) => ("flows_replaced", vec![dp("kernel")]),
        (Some(d @ ("encap" | "decap" | "inject")), _) => (
            "datapath_packets",
            vec![dp("kernel"), ("action", d.to_string())],
        ),
        (Some(r), _) if r.starts_with("drop_") => (
            "dropped_packets",
            vec![dp("kernel"), ("reason", r["drop_".len()..].to_string())],
        ),
        (Some(r), _) if r.starts_with("slow_") => (
            "slow_path_packets",
            vec![dp("kernel"), ("reason", r["slow_".len()..].to_string())],
        ),
        (Some("masks"), _) | (_, Some("flows")) => return None,
        _ => ("datapath_events", vec![("counter", name.to_string())]),
    })
}

/// Label pairs and a counter's value: one sample of a family.
type Rows<'a> = Vec<(Vec<(&'a str, &'a str)>, u64)>;

/// A sample whose label values are made here (the datapath's names).
type Owned = (Vec<(&'static str, String)>, u64);

/// The per-port families: name, help, unit, and the counter they read.
type PortFamily = (
    &'static str,
    &'static str,
    Option<Unit>,
    fn(&PortRow) -> u64,
);

const PORT_FAMILIES: [PortFamily; 6] = [
    (
        "port_receive_packets",
        "Packets received on the port (a super-frame counts its segments).",
        None,
        |p| p.rx_packets,
    ),
    (
        "port_receive",
        "Bytes received on the port.",
        Some(Unit::Bytes),
        |p| p.rx_bytes,
    ),
    (
        "port_transmit_packets",
        "Packets sent on the port.",
        None,
        |p| p.tx_packets,
    ),
    (
        "port_transmit",
        "Bytes sent on the port.",
        Some(Unit::Bytes),
        |p| p.tx_bytes,
    ),
    (
        "port_transmit_errors",
        "Packets the port failed to send.",
        None,
        |p| p.tx_errors,
    ),
    (
        "port_receive_dropped",
        "Packets the kernel datapath dropped on receive from the port.",
        None,
        |p| p.rx_dropped,
    ),
];

/// The help of a caching datapath's counter family.
fn datapath_help(family: &str) -> &'static str {
    match family {
        "flow_lookups" => "Packets looked up in the datapath's flow cache, by result.",
        "upcalls" => "Packets the kernel datapath sent up to the slow path.",
        "flows_installed" => "Flows installed in the datapath's cache.",
        "flows_not_installed" => "Decisions not installed in the datapath's cache, by reason.",
        "flow_evictions" => "Cached flows evicted to make room.",
        "revalidations" => "Rule changes the cache was revalidated for, by how.",
        "flows_replaced" => "Cached flows given new actions in place by a revalidation.",
        "datapath_packets" => "Packets the kernel datapath encapsulated, decapsulated or injected.",
        "slow_path_packets" => "Packets the kernel datapath passed to the slow path, by reason.",
        _ => "A datapath counter, by its name in `tunlab ctl stats`.",
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let st = &self.st;
        for (name, help, unit, read) in PORT_FAMILIES {
            let rows: Rows = st
                .ports
                .iter()
                .map(|p| {
                    (
                        vec![("port", p.name.as_str()), ("kind", p.kind.as_str())],
                        read(p),
                    )
                })
                .collect();
            counters(&mut enc, name, help, unit.as_ref(), &rows)?;
        }
        self.datapath_families(&mut enc)?;
        let fragmented: Rows = st
            .outer_fragmented
            .iter()
            .map(|(k, v)| (vec![("tunnel", k.as_str())], *v))
            .collect();
        counters(
            &mut enc,
            "outer_fragmented_packets",
            "Packets sent in fragmented outer packets, by tunnel kind.",
            None,
            &fragmented,
        )?;
        counters(
            &mut enc,
            "slow_path_cache_lookups",
            "Lookups in the slow path's exact-match cache of classifier decisions.",
            None,
            &[
                (vec![("result", "hit")], st.cache_hits),
                (vec![("result", "miss")], st.cache_misses),
            ],
        )?;
        let refused: Rows = st
            .openflow_refused
            .iter()
            .map(|(r, v)| (vec![("reason", r.as_str())], *v))
            .collect();
        counters(
            &mut enc,
            "openflow_connections_refused",
            "OpenFlow connections refused, by reason (tls: no certificate the CA signed, or no handshake in time).",
            None,
            &refused,
        )?;
        self.gauges(&mut enc)
    }
}

impl Snapshot {
    /// Drops (the slow path's and the kernel's in one family) and the
    /// caching datapath's counters, grouped into families.
    fn datapath_families(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let st = &self.st;
        let mut families: std::collections::BTreeMap<&str, Vec<Owned>> = Default::default();
        for (name, v) in &st.datapath {
            if let Some((family, labels)) = datapath_family(name) {
                families.entry(family).or_default().push((labels, *v));
            }
        }
        let mut dropped: Rows = st
            .drops
            .iter()
            .map(|(r, v)| (vec![("datapath", "slow_path"), ("reason", r.as_str())], *v))
            .collect();
        let kernel_drops = families.remove("dropped_packets").unwrap_or_default();
        dropped.extend(
            kernel_drops
                .iter()
                .map(|(l, v)| (l.iter().map(|(k, x)| (*k, x.as_str())).collect(), *v)),
        );
        counters(
            enc,
            "dropped_packets",
            "Packets dropped, by datapath and reason.",
            None,
            &dropped,
        )?;
        for (family, rows) in &families {
            let rows: Rows = rows
                .iter()
                .map(|(l, v)| (l.iter().map(|(k, x)| (*k, x.as_str())).collect(), *v))
                .collect();
            counters(enc, family, datapath_help(family), None, &rows)?;
        }
        Ok(())
    }

    /// What is a level rather than a count: masks and flows in the caches,
    /// the revalidator's last sweep, the process's memory.
    fn gauges(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let st = &self.st;
        let find = |n: &str| {
            st.datapath
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| *v as i64)
        };
        if let Some(m) = find("kernel_masks") {
            gauge(
                enc,
                "kernel_masks",
                "Megaflow masks in use in the kernel datapath's cache.",
                None,
                m,
            )?;
        }
        if let Some(f) = find("netdev_flows") {
            gauge(
                enc,
                "userspace_flows",
                "Flows in the userspace datapath's caches.",
                None,
                f,
            )?;
        }
        if let Some(r) = &st.revalidator {
            gauge(
                enc,
                "kernel_flows",
                "Flows in the kernel datapath's cache at the revalidator's last sweep.",
                None,
                r.last_seen as i64,
            )?;
            counters(
                enc,
                "revalidator_sweeps",
                "Sweeps of the kernel datapath's cache.",
                None,
                &[(vec![], r.sweeps)],
            )?;
            counters(
                enc,
                "revalidator_flows_deleted",
                "Cached flows the revalidator deleted, by reason.",
                None,
                &[
                    (vec![("reason", "idle")], r.idle_deleted),
                    (vec![("reason", "stale")], r.stale_deleted),
                    (vec![("reason", "evicted")], r.evicted),
                ],
            )?;
            let g = ConstGauge::new(r.last_sweep_ms / 1e3);
            g.encode(enc.encode_descriptor(
                "revalidator_last_sweep",
                "How long the revalidator's last sweep took.",
                Some(&Unit::Seconds),
                g.metric_type(),
            )?)?;
        }
        if let Some(b) = self.resident {
            gauge(
                enc,
                "resident_memory",
                "The switch process's resident memory.",
                Some(&Unit::Bytes),
                b as i64,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunlab_ctl::Revalidator;

    fn stats() -> Stats {
        Stats {
            ports: vec![PortRow {
                name: "tap-a".into(),
                ofport: 1,
                kind: "tap".into(),
                rx_packets: 10,
                rx_bytes: 1500,
                tx_packets: 7,
                tx_bytes: 700,
                ..Default::default()
            }],
            drops: [("no_rule".to_string(), 3)].into(),
            outer_fragmented: Default::default(),
            cache_hits: 5,
            cache_misses: 2,
            datapath: vec![
                ("kernel_hit".into(), 100),
                ("kernel_miss".into(), 4),
                ("kernel_upcall".into(), 4),
                ("kernel_drop_policed".into(), 9),
                ("kernel_slow_no_route".into(), 1),
                ("kernel_installed".into(), 3),
                ("kernel_masks".into(), 2),
                ("kernel_not_installed_controller".into(), 1),
                ("kernel_brand_new".into(), 6),
            ],
            revalidator: Some(Revalidator {
                sweeps: 8,
                idle_deleted: 1,
                stale_deleted: 0,
                evicted: 0,
                last_seen: 3,
                last_sweep_ms: 0.25,
            }),
            openflow_refused: [("tls".to_string(), 2)].into(),
        }
    }

    #[test]
    fn the_statistics_become_labelled_families() {
        let text = render(&stats(), Some(4096));
        for line in [
            "# TYPE tunlab_port_receive_bytes counter",
            "tunlab_port_receive_bytes_total{port=\"tap-a\",kind=\"tap\"} 1500",
            "tunlab_dropped_packets_total{datapath=\"slow_path\",reason=\"no_rule\"} 3",
            "tunlab_dropped_packets_total{datapath=\"kernel\",reason=\"policed\"} 9",
            "tunlab_flow_lookups_total{datapath=\"kernel\",result=\"hit\"} 100",
            "tunlab_upcalls_total{datapath=\"kernel\"} 4",
            "tunlab_openflow_connections_refused_total{reason=\"tls\"} 2",
            "tunlab_flows_not_installed_total{datapath=\"kernel\",reason=\"controller\"} 1",
            "tunlab_slow_path_packets_total{datapath=\"kernel\",reason=\"no_route\"} 1",
            "tunlab_kernel_masks 2",
            "tunlab_kernel_flows 3",
            "tunlab_revalidator_last_sweep_seconds 0.00025",
            "tunlab_resident_memory_bytes 4096",
            // A counter this file does not know yet is still there.
            "tunlab_datapath_events_total{counter=\"kernel_brand_new\"} 6",
            "# EOF",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in\n{text}"
            );
        }
        // Each family once: its samples together.
        let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE")).collect();
        let mut unique = types.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(types.len(), unique.len(), "{text}");
    }
}
