//! Request/response, netperf's TCP_RR and UDP_RR: the client sends a
//! request of `size` bytes and waits for a response of the same size,
//! one transaction at a time, for a fixed time; the server echoes.
//!
//! Why not sockperf, as before: its client sleeps 2 s after its warm-up
//! and counts only part of its run, so a 1-s sample cost 3.3 s, and an
//! article's rounds ran out of budget at nine. netperf is not in Debian's
//! main archive. The lab's RR samples now cost their length plus 0.1 s.
//!
//! Both sides set `TCP_NODELAY` (as sockperf and netperf's RR tests do in
//! effect: one request in flight, nothing for Nagle to hold). A UDP
//! request carries its sequence number in its first 8 bytes; a response
//! not back within [`UDP_WAIT`] counts as lost and the next request goes,
//! and a late response to an older request is dropped.

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// How long a UDP request waits for its response before it counts lost.
pub const UDP_WAIT: Duration = Duration::from_millis(200);
/// Transactions before the measured time (ARP, caches, the switch's
/// first-packet path), not counted.
pub const WARM_UP: Duration = Duration::from_millis(100);
/// How long a TCP transaction may take before the run fails.
const TCP_WAIT: Duration = Duration::from_secs(5);
/// Round trips kept for the percentiles, at most (the count goes on).
const KEEP: usize = 20_000_000;
/// The largest message: one UDP datagram's payload.
pub const MAX_SIZE: usize = 65_507;

/// TCP or UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Tcp,
    Udp,
}

/// What one client run measured (printed as one JSON line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub proto: Proto,
    pub size: usize,
    /// The measured time (the warm-up aside).
    pub seconds: f64,
    pub transactions: u64,
    pub trans_s: f64,
    pub rtt_mean_us: f64,
    pub rtt_p50_us: f64,
    pub rtt_p99_us: f64,
    /// UDP requests whose response did not come back within [`UDP_WAIT`].
    pub lost: u64,
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RrError {
    #[error(
        "message size {0}: must be 1..={MAX_SIZE} bytes (UDP: at least 8, for the sequence number)"
    )]
    Size(usize),
    #[error("{what} {addr}: {err}")]
    Io {
        what: &'static str,
        addr: SocketAddr,
        err: std::io::Error,
    },
    #[error("{0}: no transaction completed in {1:.1} s")]
    Nothing(SocketAddr, f64),
}

fn io(what: &'static str, addr: SocketAddr) -> impl FnOnce(std::io::Error) -> RrError {
    move |err| RrError::Io { what, addr, err }
}

/// A bound server: TCP listening, or a UDP socket.
#[derive(Debug)]
pub enum Server {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

impl Server {
    /// Bind `addr` (port 0: any free port, [`Server::addr`] says which).
    pub fn bind(proto: Proto, addr: SocketAddr) -> Result<Server, RrError> {
        Ok(match proto {
            Proto::Tcp => Server::Tcp(TcpListener::bind(addr).map_err(io("listen on", addr))?),
            Proto::Udp => Server::Udp(UdpSocket::bind(addr).map_err(io("bind", addr))?),
        })
    }

    /// The address bound.
    pub fn addr(&self) -> std::io::Result<SocketAddr> {
        match self {
            Server::Tcp(l) => l.local_addr(),
            Server::Udp(s) => s.local_addr(),
        }
    }

    /// Echo until killed: every TCP connection's bytes (each in a thread
    /// of its own), or every UDP datagram to its sender.
    pub fn run(self) {
        match self {
            Server::Tcp(l) => {
                for c in l.incoming().flatten() {
                    std::thread::spawn(move || echo_tcp(c));
                }
            }
            Server::Udp(s) => {
                let mut buf = vec![0u8; MAX_SIZE];
                loop {
                    // A send that fails (the client gone) loses that reply.
                    if let Ok((n, from)) = s.recv_from(&mut buf) {
                        let _ = s.send_to(&buf[..n], from);
                    }
                }
            }
        }
    }
}

/// Serve `addr` until killed ([`Server::run`]).
pub fn serve(proto: Proto, addr: SocketAddr) -> Result<(), RrError> {
    Server::bind(proto, addr)?.run();
    Ok(())
}

fn echo_tcp(mut c: TcpStream) {
    let _ = c.set_nodelay(true);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if c.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

/// One transaction at a time against `addr` for `secs` seconds after
/// [`WARM_UP`].
pub fn client(proto: Proto, addr: SocketAddr, size: usize, secs: f64) -> Result<Report, RrError> {
    let min = if proto == Proto::Udp { 8 } else { 1 };
    if !(min..=MAX_SIZE).contains(&size) {
        return Err(RrError::Size(size));
    }
    let mut t: Box<dyn Transact> = match proto {
        Proto::Tcp => Box::new(Tcp::connect(addr, size)?),
        Proto::Udp => Box::new(Udp::connect(addr, size)?),
    };
    let warm_end = Instant::now() + WARM_UP;
    while Instant::now() < warm_end {
        t.once()?;
    }
    let lost_before = t.lost();
    let mut rtts: Vec<u32> = Vec::new();
    let mut n = 0u64;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs.max(0.0));
    let mut now = start;
    while now < end {
        let done = t.once()?;
        let after = Instant::now();
        if done {
            n += 1;
            if rtts.len() < KEEP {
                rtts.push((after - now).as_nanos().min(u32::MAX as u128) as u32);
            }
        }
        now = after;
    }
    let seconds = (now - start).as_secs_f64();
    if n == 0 {
        return Err(RrError::Nothing(addr, seconds));
    }
    Ok(summarize(
        proto,
        size,
        seconds,
        n,
        &mut rtts,
        t.lost() - lost_before,
    ))
}

fn summarize(
    proto: Proto,
    size: usize,
    seconds: f64,
    transactions: u64,
    rtts: &mut [u32],
    lost: u64,
) -> Report {
    rtts.sort_unstable();
    let at = |q: f64| -> f64 {
        if rtts.is_empty() {
            return 0.0;
        }
        let i = ((rtts.len() as f64 * q).ceil() as usize).clamp(1, rtts.len()) - 1;
        rtts[i] as f64 / 1e3
    };
    let mean = rtts.iter().map(|&r| r as f64).sum::<f64>() / rtts.len().max(1) as f64 / 1e3;
    Report {
        proto,
        size,
        seconds,
        transactions,
        trans_s: transactions as f64 / seconds.max(1e-9),
        rtt_mean_us: mean,
        rtt_p50_us: at(0.50),
        rtt_p99_us: at(0.99),
        lost,
    }
}

/// One request and its response; `false`: a UDP request lost.
trait Transact {
    fn once(&mut self) -> Result<bool, RrError>;
    fn lost(&self) -> u64;
}

struct Tcp {
    s: TcpStream,
    addr: SocketAddr,
    req: Vec<u8>,
    resp: Vec<u8>,
}

impl Tcp {
    fn connect(addr: SocketAddr, size: usize) -> Result<Tcp, RrError> {
        let s = TcpStream::connect_timeout(&addr, TCP_WAIT).map_err(io("connect to", addr))?;
        s.set_nodelay(true).map_err(io("TCP_NODELAY on", addr))?;
        s.set_read_timeout(Some(TCP_WAIT))
            .map_err(io("read timeout on", addr))?;
        Ok(Tcp {
            s,
            addr,
            req: vec![0x5a; size],
            resp: vec![0; size],
        })
    }
}

impl Transact for Tcp {
    fn once(&mut self) -> Result<bool, RrError> {
        self.s
            .write_all(&self.req)
            .map_err(io("send to", self.addr))?;
        self.s
            .read_exact(&mut self.resp)
            .map_err(io("response from", self.addr))?;
        Ok(true)
    }

    fn lost(&self) -> u64 {
        0
    }
}

struct Udp {
    s: UdpSocket,
    addr: SocketAddr,
    seq: u64,
    lost: u64,
    req: Vec<u8>,
    resp: Vec<u8>,
}

impl Udp {
    fn connect(addr: SocketAddr, size: usize) -> Result<Udp, RrError> {
        let any = if addr.is_ipv4() {
            SocketAddr::from(([0u8; 4], 0))
        } else {
            SocketAddr::from(([0u16; 8], 0))
        };
        let s = UdpSocket::bind(any).map_err(io("bind for", addr))?;
        s.connect(addr).map_err(io("connect to", addr))?;
        s.set_read_timeout(Some(UDP_WAIT))
            .map_err(io("read timeout on", addr))?;
        Ok(Udp {
            s,
            addr,
            seq: 0,
            lost: 0,
            req: vec![0x5a; size],
            resp: vec![0; MAX_SIZE],
        })
    }
}

impl Transact for Udp {
    fn once(&mut self) -> Result<bool, RrError> {
        self.seq += 1;
        self.req[..8].copy_from_slice(&self.seq.to_be_bytes());
        self.s.send(&self.req).map_err(io("send to", self.addr))?;
        loop {
            match self.s.recv(&mut self.resp) {
                Ok(n) if n >= 8 && self.resp[..8] == self.seq.to_be_bytes() => return Ok(true),
                // A late response to an earlier request.
                Ok(_) => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    self.lost += 1;
                    return Ok(false);
                }
                // ICMP port unreachable (no server yet) and the like.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    self.lost += 1;
                    std::thread::sleep(UDP_WAIT);
                    return Ok(false);
                }
                Err(e) => return Err(io("response from", self.addr)(e)),
            }
        }
    }

    fn lost(&self) -> u64 {
        self.lost
    }
}

/// Read a client's JSON line.
pub fn parse(out: &str) -> Result<Report, String> {
    let line = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| format!("tunlab rr printed no JSON: {:.300}", out.trim()))?;
    serde_json::from_str(line).map_err(|e| format!("tunlab rr's report: {e}: {line:.300}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server `tunlab rr serve` runs, on a free port of loopback.
    fn server(proto: Proto) -> SocketAddr {
        let s = Server::bind(proto, "127.0.0.1:0".parse().expect("a literal")).expect("bind");
        let a = s.addr().expect("addr");
        std::thread::spawn(move || s.run());
        a
    }

    #[test]
    fn tcp_and_udp_transactions_are_counted_and_timed() {
        for (proto, size) in [(Proto::Tcp, 1), (Proto::Tcp, 16384), (Proto::Udp, 64)] {
            let r = client(proto, server(proto), size, 0.2).expect("a run");
            assert!(r.transactions > 10, "{r:?}");
            assert!((r.trans_s - r.transactions as f64 / r.seconds).abs() < 1e-6);
            assert!(r.seconds >= 0.2 && r.seconds < 1.0, "{r:?}");
            assert!(r.rtt_p50_us > 0.0 && r.rtt_p50_us <= r.rtt_p99_us, "{r:?}");
            assert_eq!(r.lost, 0);
            let back = parse(&serde_json::to_string(&r).expect("json")).expect("parsed");
            assert_eq!((back.transactions, back.lost), (r.transactions, r.lost));
            assert!((back.rtt_mean_us - r.rtt_mean_us).abs() < 1e-9);
        }
    }

    #[test]
    fn udp_without_a_server_loses_everything_and_says_so() {
        // A bound socket that never answers.
        let quiet = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = quiet.local_addr().expect("addr");
        let err = client(Proto::Udp, addr, 64, 0.3).expect_err("nothing answered");
        assert!(err.to_string().contains("no transaction"), "{err}");
    }

    #[test]
    fn sizes_out_of_range_are_refused() {
        let addr: SocketAddr = "127.0.0.1:9".parse().expect("a literal");
        for (p, s) in [(Proto::Tcp, 0), (Proto::Udp, 7), (Proto::Tcp, MAX_SIZE + 1)] {
            let e = client(p, addr, s, 0.1).expect_err("refused");
            assert!(e.to_string().contains(&s.to_string()), "{e}");
        }
    }

    #[test]
    fn percentiles_and_mean() {
        let mut r: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        let rep = summarize(Proto::Tcp, 64, 2.0, 100, &mut r, 0);
        assert_eq!(rep.rtt_p50_us, 50.0);
        assert_eq!(rep.rtt_p99_us, 99.0);
        assert_eq!(rep.rtt_mean_us, 50.5);
        assert_eq!(rep.trans_s, 50.0);
    }

    #[test]
    fn output_without_json_is_an_error_naming_it() {
        let e = parse("connect: refused").expect_err("no json");
        assert!(e.contains("no JSON") && e.contains("refused"), "{e}");
        assert!(parse("{\"proto\":\"tcp\"}").is_err());
    }
}
