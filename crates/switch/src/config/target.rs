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
    /// `ssl:IP[:PORT]`: connect to a controller there over TLS.
    Ssl(SocketAddr),
    /// `pssl:[PORT][:IP]`: listen for controllers over TLS (every address
    /// when none is given, as OVS: a controller must hold a certificate
    /// the configured CA signed).
    PSsl(SocketAddr),
}

impl Target {
    /// Whether it needs the `[ssl]` table's key and certificates.
    pub fn is_tls(&self) -> bool {
        matches!(self, Target::Ssl(_) | Target::PSsl(_))
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (method, a) = match self {
            Target::Tcp(a) => ("tcp", a),
            Target::Ssl(a) => ("ssl", a),
            Target::PTcp(a) => return write!(f, "ptcp:{}:{}", a.port(), a.ip()),
            Target::PSsl(a) => return write!(f, "pssl:{}:{}", a.port(), a.ip()),
        };
        write!(f, "{method}:{a}")
    }
}

/// Read an OpenFlow connection method as OVS writes it (`tcp:IP[:PORT]`,
/// `ptcp:[PORT][:IP]`, and over TLS `ssl:IP[:PORT]`, `pssl:[PORT][:IP]`;
/// the port defaults to 6653); the error names what is wrong.
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
    let active = s.strip_prefix("tcp:").map(|r| (r, false));
    if let Some((rest, tls)) = active.or_else(|| s.strip_prefix("ssl:").map(|r| (r, true))) {
        // The last colon splits off the port unless the address is a bare
        // IPv6 one.
        let (a, p) = match rest.rsplit_once(':') {
            Some((a, p)) if !a.is_empty() && (rest.starts_with('[') || !a.contains(':')) => (a, p),
            _ => (rest, ""),
        };
        if a.is_empty() {
            return Err(format!(
                "'{s}': needs the controller's address (tcp:IP[:PORT] or ssl:IP[:PORT])"
            ));
        }
        let addr = SocketAddr::new(ip(a)?, port(p)?);
        return Ok(if tls {
            Target::Ssl(addr)
        } else {
            Target::Tcp(addr)
        });
    }
    let passive = s.strip_prefix("ptcp:").map(|r| (r, false));
    if let Some((rest, tls)) = passive.or_else(|| s.strip_prefix("pssl:").map(|r| (r, true))) {
        let (p, a) = rest.split_once(':').unwrap_or((rest, ""));
        let addr = match (a.is_empty(), tls) {
            (false, _) => ip(a)?,
            (true, false) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            (true, true) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        };
        let addr = SocketAddr::new(addr, port(p)?);
        return Ok(if tls {
            Target::PSsl(addr)
        } else {
            Target::PTcp(addr)
        });
    }
    Err(format!(
        "'{s}': not an OpenFlow connection method (tcp:IP[:PORT], ptcp:[PORT][:IP], ssl:IP[:PORT] or pssl:[PORT][:IP]; the management socket punix: is always there)"
    ))
}
