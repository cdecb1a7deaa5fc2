//! What the lab measures: a test (kind, message size, instances, a fixed
//! rate) and the figures of one sample of it. Data only: the tools that
//! produce samples live in [`crate::traffic`] and
//! [`crate::first_packet`], the CPU meter in [`crate::meter`].

use crate::cpu::Usage;
use serde::{Deserialize, Serialize};

/// What a test does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    TcpStream,
    TcpMaerts,
    TcpBidirec,
    TcpRr,
    UdpRr,
    UdpStream,
    /// A new flow's first packet against the next one, one-way
    /// ([`crate::first_packet`]).
    FirstPacket,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::TcpStream,
        Kind::TcpMaerts,
        Kind::TcpBidirec,
        Kind::TcpRr,
        Kind::UdpRr,
        Kind::UdpStream,
        Kind::FirstPacket,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::TcpStream => "tcp_stream",
            Kind::TcpMaerts => "tcp_maerts",
            Kind::TcpBidirec => "tcp_bidirec",
            Kind::TcpRr => "tcp_rr",
            Kind::UdpRr => "udp_rr",
            Kind::UdpStream => "udp_stream",
            Kind::FirstPacket => "first_packet",
        }
    }

    pub fn is_rr(self) -> bool {
        matches!(self, Kind::TcpRr | Kind::UdpRr)
    }
}

/// One test: kind, message size, instances, and for the fixed-rate CPU
/// test of the QinQ article a target rate in Gbit/s across all instances.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Test {
    pub kind: Kind,
    pub size: usize,
    pub instances: usize,
    pub rate_gbit: Option<f64>,
}

impl Test {
    /// `tcp_rr-1024B-8i`, `tcp_stream-16384B-1i@2G`.
    pub fn name(&self) -> String {
        let mut s = format!("{}-{}B-{}i", self.kind.name(), self.size, self.instances);
        if let Some(r) = self.rate_gbit {
            s.push_str(&format!("@{r}G"));
        }
        s
    }

    /// Parse a test name as [`Test::name`] prints it.
    pub fn parse(s: &str) -> Result<Test, String> {
        let valid = || {
            format!(
                "'{s}' is not a test: write KIND-SIZEB-Ni[@RATEG], KIND one of {}, e.g. tcp_rr-1024B-8i or tcp_stream-16384B-1i@2G",
                Kind::ALL.map(Kind::name).join(", ")
            )
        };
        let (body, rate) = match s.split_once('@') {
            Some((b, r)) => {
                let g = r
                    .strip_suffix('G')
                    .and_then(|g| g.parse::<f64>().ok())
                    .filter(|g| *g > 0.0);
                (b, Some(g.ok_or_else(valid)?))
            }
            None => (s, None),
        };
        let mut parts = body.split('-');
        let (Some(k), Some(sz), Some(n), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(valid());
        };
        let kind = Kind::ALL
            .into_iter()
            .find(|x| x.name() == k)
            .ok_or_else(valid)?;
        // TCP writes up to 1 MiB (iperf3's default is 128 KB); a UDP
        // datagram holds at most 65,507 bytes, 65,000 keeps clear of it; a
        // first-packet probe is one frame on every variant, stamps included.
        let max = match kind {
            Kind::FirstPacket => 1400,
            _ if k.starts_with("udp") => 65_000,
            _ => 1 << 20,
        };
        let min = if kind == Kind::FirstPacket { 24 } else { 1 };
        let size: usize = sz
            .strip_suffix('B')
            .and_then(|x| x.parse().ok())
            .ok_or_else(valid)?;
        if !(min..=max).contains(&size) {
            return Err(format!(
                "'{s}': the size must be {min}..{max} bytes for {k}"
            ));
        }
        let instances = n
            .strip_suffix('i')
            .and_then(|x| x.parse().ok())
            .filter(|x| (1..=128).contains(x))
            .ok_or_else(valid)?;
        if rate.is_some() && (kind.is_rr() || kind == Kind::FirstPacket) {
            return Err(format!("'{s}': a target rate applies to stream tests only"));
        }
        if kind == Kind::FirstPacket && instances != 1 {
            return Err(format!(
                "'{s}': first_packet probes one flow at a time: write 1i"
            ));
        }
        Ok(Test {
            kind,
            size,
            instances,
            rate_gbit: rate,
        })
    }

    /// The figure a sample set is judged and compared by.
    pub fn primary(&self, s: &Sample) -> f64 {
        match self.kind {
            Kind::TcpRr | Kind::UdpRr => s.trans_s.unwrap_or(0.0),
            Kind::FirstPacket => s.first_packet.map_or(0.0, |f| f.first_p99_us),
            // At a fixed rate every variant moves the same bytes: CPU is
            // what differs.
            _ if self.rate_gbit.is_some() => s.cpu.system_pct,
            Kind::UdpStream => s.rx_pps.unwrap_or(0.0),
            _ => s.gbit_s.unwrap_or(0.0),
        }
    }

    /// The primary figure's unit.
    pub fn unit(&self) -> &'static str {
        match self.kind {
            Kind::TcpRr | Kind::UdpRr => "trans/s",
            Kind::FirstPacket => "µs first packet p99",
            _ if self.rate_gbit.is_some() => "CPU %",
            Kind::UdpStream => "pps",
            _ => "Gbit/s",
        }
    }
}

/// The figures of one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Received payload throughput across instances (both ways for bidirec).
    pub gbit_s: Option<f64>,
    pub trans_s: Option<f64>,
    /// Round-trip latency in µs (`tunlab rr`'s; runs before fa0a273 had
    /// sockperf's, doubled from its half round trips).
    pub rtt_mean_us: Option<f64>,
    pub rtt_p50_us: Option<f64>,
    pub rtt_p99_us: Option<f64>,
    /// Datagrams lost: udp_stream's (iperf3's count), udp_rr's requests
    /// not answered within 200 ms, first_packet's probes.
    pub udp_loss_pct: Option<f64>,
    /// UDP datagrams received per second.
    pub rx_pps: Option<f64>,
    pub tcp_retransmits: Option<u64>,
    pub cpu: Usage,
    /// CPU µs per KB moved, across the machine (netperf's service demand).
    pub service_demand_us_per_kb: Option<f64>,
    pub seconds: f64,
    /// What the server tenant's interface counted (all frames, headers
    /// included), in Gbit/s: an independent check of the tool's figure.
    pub iface_rx_gbit_s: Option<f64>,
    /// A `first_packet` sample's one-way delays.
    #[serde(default)]
    pub first_packet: Option<FirstPacket>,
    /// On real hosts: each host's own CPU (`cpu` is then their sum, as if
    /// one machine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts_cpu: Vec<HostCpu>,
    /// The round it was taken in (absent in runs before rounds existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<usize>,
    /// Its place in the run's order of samples (retakes included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<usize>,
    /// What else the machine did meanwhile ([`crate::guard`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<crate::guard::Noise>,
}

/// One real host's CPU over a sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostCpu {
    pub host: String,
    pub usage: Usage,
}

/// A `first_packet` sample's figures (one-way delays in µs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FirstPacket {
    /// Probes that came back (both datagrams).
    pub probes: usize,
    pub first_p50_us: f64,
    pub first_p99_us: f64,
    /// The second datagram of the same flow (cached).
    pub next_p50_us: f64,
    pub next_p99_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_names_round_trip_and_bad_ones_name_the_valid_forms() {
        for s in [
            "tcp_rr-1024B-8i",
            "udp_stream-64B-1i",
            "tcp_stream-16384B-1i@2G",
        ] {
            assert_eq!(Test::parse(s).unwrap().name(), s);
        }
        let e = Test::parse("tcp_rrr-1B-1i").unwrap_err();
        assert!(
            e.contains("tcp_stream, tcp_maerts") && e.contains("tcp_rr-1024B-8i"),
            "{e}"
        );
        assert!(Test::parse("tcp_rr-0B-1i").is_err());
        assert!(Test::parse("tcp_rr-64B-1i@2G")
            .unwrap_err()
            .contains("stream tests only"));
        assert!(Test::parse("tcp_stream-64B").is_err());
        assert_eq!(
            Test::parse("first_packet-64B-1i").unwrap().name(),
            "first_packet-64B-1i"
        );
        assert!(Test::parse("first_packet-64B-8i")
            .unwrap_err()
            .contains("write 1i"));
        // The probe carries 24 bytes of stamps and stays one frame.
        assert!(Test::parse("first_packet-16B-1i")
            .unwrap_err()
            .contains("24..1400"));
        assert!(Test::parse("first_packet-1500B-1i").is_err());
        assert!(Test::parse("first_packet-64B-1i@1G").is_err());
    }
}
