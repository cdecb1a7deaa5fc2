//! The controller connections of `[switch] openflow`, as OVS writes them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// OpenFlow's registered port, the default for `tcp:` and `ptcp:`.
pub const OPENFLOW_PORT: u16 = 6653;

/// One entry of `[switch] openflow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `tcp:IP[:PORT]`: connect to a controller there.
    Tcp(SocketAddr),
    /// `ptcp:[PORT][:IP]`: listen for controllers there.
    PTcp(SocketAddr),
}

/// Read an OpenFlow connection method as OVS writes it (`tcp:IP[:PORT]`,
/// `ptcp:[PORT][:IP]`; the port defaults to 6653); the error names what
/// is wrong.
///
/// `ptcp:` without an address listens on the loopback address only,
/// where OVS listens on every address: an OpenFlow connection without
/// TLS is unauthenticated, and whoever reaches it can rewrite every rule
/// of the switch. Listening beyond this host takes an address written out
/// (`ptcp:6653:0.0.0.0`).
pub fn parse_target(s: &str) -> Result<Target, String> {
    let port = |p: &str| -> Result<u16, String> {
        if p.is_empty() {
            return Ok(OPENFLOW_PORT);
        }
        p.parse::<u16>()
            .map_err(|_| format!("'{s}': port '{p}' is not a number from 0 to 65535"))
    };
    let ip = |a: &str| -> Result<IpAddr, String> {
        a.trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .map_err(|_| format!("'{s}': '{a}' is not an IP address"))
    };
    if let Some(rest) = s.strip_prefix("tcp:") {
        // The last colon splits off the port unless the address is a bare
        // IPv6 one.
        let (a, p) = match rest.rsplit_once(':') {
            Some((a, p)) if !a.is_empty() && (rest.starts_with('[') || !a.contains(':')) => (a, p),
            _ => (rest, ""),
        };
        if a.is_empty() {
            return Err(format!(
                "'{s}': tcp: needs the controller's address (tcp:IP[:PORT])"
            ));
        }
        return Ok(Target::Tcp(SocketAddr::new(ip(a)?, port(p)?)));
    }
    if let Some(rest) = s.strip_prefix("ptcp:") {
        let (p, a) = rest.split_once(':').unwrap_or((rest, ""));
        let addr = if a.is_empty() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            ip(a)?
        };
        return Ok(Target::PTcp(SocketAddr::new(addr, port(p)?)));
    }
    Err(format!(
        "'{s}': not an OpenFlow connection method (tcp:IP[:PORT] or ptcp:[PORT][:IP]; the management socket punix: is always there)"
    ))
}
