//! The OpenFlow side of a node, as Open vSwitch's: the management socket
//! `punix:/run/tunlab/NAME.mgmt` (mode and access as the control
//! socket's) for `ovs-ofctl`, and the controller connections listed in
//! `[switch] openflow`: `tcp:IP[:PORT]` (the switch connects, and
//! reconnects with a backoff of 1 to 8 s, as OVS's rconn) and
//! `ptcp:[PORT][:IP]` (the switch listens). Each connection speaks
//! OpenFlow 1.0, 1.3 or 1.5, agreed in the HELLO exchange.
//!
//! What each message gets is in [`handle`]. Controller connections (the
//! `openflow` list) also get the asynchronous messages: PACKET_IN from the
//! workers' `controller` actions (through a bounded queue, so that a
//! worker never waits for a controller; each connection's form written
//! here), FLOW_REMOVED and PORT_STATUS, and ECHO requests when idle for
//! 5 s (closed after 5 s more without a word, as OVS's inactivity probe).
//! The management socket is a service connection: asynchronous messages
//! only once it sets a non-zero miss_send_len (OVS's rule).
//!
//! Connections are non-blocking and served by the node's main thread
//! beside the control socket: a slow or hostile client delays other
//! clients, never packets. A message that cannot be framed (a length
//! below 8), a HELLO with no version in common, more than
//! [`MAX_BUFFERED`] bytes unread, or a peer that does not read what it is
//! sent within 500 ms closes that connection, after an error saying why
//! where OpenFlow has one.

mod bundle;
mod handle;
mod stats;
mod stream;

use crate::access::{bind_socket, check_peer};
use crate::config::{SslFiles, Target};
use crate::ofproto::openflow::{packet_in_message, PacketInFormat};
use crate::ofproto::{PacketInSender, QueuedPacketIn, PACKET_IN_QUEUE};
use crate::workers::Switch;
use handle::handle;
use nix::poll::{poll, PollFd, PollFlags};
use nix::unistd::Gid;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stream::{Stream, Tls};
use tunlab_wire::openflow::{self as of, Message};

/// Bytes a connection may have sent and not yet been answered for.
pub const MAX_BUFFERED: usize = 4 * of::MAX_LEN;
/// Connections served at once; more are refused.
pub const MAX_CONNECTIONS: usize = 64;
/// A controller idle this long is sent an ECHO request; silent as long
/// again, it is dropped (OVS's default inactivity probe).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// Reconnection backoff for `tcp:` controllers.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(8);
/// How often rules' idle and hard timeouts are checked.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(1);
/// How long the switch waits for a `tcp:` controller to accept.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The versions this switch speaks.
fn ours() -> u32 {
    of::version_bitmap(&[of::OF10, of::OF13, of::OF15])
}

/// One OpenFlow connection.
struct Conn {
    stream: Stream,
    /// Bytes read and not yet a whole message.
    rx: Vec<u8>,
    /// The agreed version, once the peer's HELLO came.
    version: Option<u8>,
    /// The switch's default for packet_in's bytes (SET_CONFIG changes
    /// it): 128 for a controller, 0 for a service connection (OVS's).
    miss_send_len: u16,
    /// The packet_in form it asked for (NXT_SET_PACKET_IN_FORMAT).
    packet_in_format: PacketInFormat,
    /// A controller (from `[switch] openflow`): asynchronous messages and
    /// keep-alive.
    controller: bool,
    /// The `tcp:` target it was made for, to reconnect when it closes.
    active: Option<usize>,
    /// When the peer last said anything, and whether it was asked since.
    heard: Instant,
    probed: bool,
    /// Our HELLO went out (on TLS, once the handshake is done).
    hello_sent: bool,
    /// The controller's address, for the log.
    peer: Option<SocketAddr>,
    /// Bundles open on this connection (gone with it).
    bundles: bundle::Bundles,
}

impl Conn {
    fn new(stream: Stream, controller: bool, active: Option<usize>) -> Conn {
        Conn {
            hello_sent: false,
            peer: None,
            stream,
            rx: Vec::new(),
            version: None,
            miss_send_len: if controller { 128 } else { 0 },
            packet_in_format: PacketInFormat::Standard,
            controller,
            active,
            heard: Instant::now(),
            probed: false,
            bundles: bundle::Bundles::new(),
        }
    }
}

impl Conn {
    /// OVS's rule (connmgr's `ofconn_receives_async_msg`): a controller
    /// gets asynchronous messages; a service connection (the management
    /// socket's: ovs-ofctl, ovn-controller) only once it has set a
    /// non-zero miss_send_len, so that a connection that only programs
    /// the switch is never sent what it did not ask for.
    fn receives_async(&self) -> bool {
        self.version.is_some() && (self.controller || self.miss_send_len != 0)
    }
}

/// A UUID of version 4 from the kernel's random numbers.
fn random_uuid() -> std::io::Result<[u8; 16]> {
    use std::io::Read;
    let mut u = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut u)?;
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    Ok(u)
}

/// An asynchronous message for the connections that take them, written
/// in each one's version when it is sent.
pub(super) enum Async {
    /// Already written, for 1.3 connections only (FLOW_REMOVED).
    Of13(Vec<u8>),
    /// A port came or went.
    PortStatus { reason: u8, name: String, no: u32 },
}

impl Async {
    /// The message in version `v`, if it has a form there.
    fn message(&self, v: u8) -> Option<Vec<u8>> {
        match self {
            Async::Of13(m) => (v == of::OF13).then(|| m.clone()),
            Async::PortStatus { reason, name, no } => match v {
                of::OF13 => Some(of::port_status(*reason, &stats::port_desc(v, name, *no))),
                of::OF15 => Some(of::port_status15(*reason, &stats::port_desc(v, name, *no))),
                _ => None,
            },
        }
    }
}

/// What to do with a connection after a message.
enum Next {
    Keep,
    Close,
}

/// A listening socket: the management socket, a `ptcp:` or a `pssl:` one.
enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
    Tls(TcpListener),
}

/// A `tcp:` or `ssl:` controller and when to try it next.
struct Active {
    addr: SocketAddr,
    tls: bool,
    connected: bool,
    next_try: Instant,
    backoff: Duration,
}

/// The listening sockets, the `tcp:` controllers and every connection.
pub struct MgmtServer {
    listeners: Vec<Listener>,
    /// The `[ssl]` key and certificates, when a controller uses TLS.
    tls: Option<Tls>,
    active: Vec<Active>,
    path: PathBuf,
    group: Option<Gid>,
    conns: Vec<Conn>,
    datapath_id: u64,
    /// PACKET_INs from the workers (their end is [`Self::packet_in_sender`]),
    /// and the socket whose bytes say some are queued.
    packet_in_rx: Receiver<QueuedPacketIn>,
    packet_in_tx: SyncSender<QueuedPacketIn>,
    wake_rx: UnixDatagram,
    wake_tx: Arc<UnixDatagram>,
    /// The node's UUID (OVS's bridge UUID): a paused packet_in's
    /// continuation carries it, and NXT_RESUME is checked against it.
    bridge: [u8; 16],
    /// PACKET_INs sent to controllers, and read with no controller to
    /// take them.
    pub packet_ins_sent: u64,
    pub packet_ins_unsent: u64,
    /// Asynchronous messages for the connections that take them
    /// (FLOW_REMOVED, PORT_STATUS), sent after each round.
    outbox: Vec<Async>,
    /// When rules' timeouts were last checked.
    expired_at: Instant,
    /// The ports as controllers were last told of them.
    ports: Option<Vec<(String, u32)>>,
}

impl std::fmt::Debug for MgmtServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MgmtServer")
            .field("path", &self.path)
            .field("connections", &self.conns.len())
            .finish()
    }
}

/// The management socket beside a node's control socket:
/// `/run/tunlab/NAME.ctl` has `/run/tunlab/NAME.mgmt`.
pub fn path_beside(control_socket: &Path) -> PathBuf {
    control_socket.with_extension("mgmt")
}

/// A datapath id for node `name`: stable across restarts, as OVS's is
/// (there it comes from a MAC address; here from the name, FNV-1a folded
/// to 48 bits as a MAC would be).
pub fn datapath_id(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h & 0xffff_ffff_ffff
}

impl MgmtServer {
    /// Listen at `path` for node `name` (access as the control socket's:
    /// 0600, or 0660 for `group`), on every `ptcp:` and `pssl:` target,
    /// and get ready to connect to every `tcp:` and `ssl:` one; `ssl`
    /// (the `[ssl]` table) is read when a target needs it.
    pub fn bind(
        path: &Path,
        group: Option<&str>,
        name: &str,
        targets: &[Target],
        ssl: Option<&SslFiles>,
    ) -> std::io::Result<MgmtServer> {
        let tls = match (targets.iter().any(Target::is_tls), ssl) {
            (false, _) => None,
            (true, Some(files)) => Some(Tls::load(files)?),
            (true, None) => {
                return Err(std::io::Error::new(
                    ErrorKind::InvalidInput,
                    "ssl: and pssl: need the [ssl] table",
                ))
            }
        };
        let (listener, group) = bind_socket(path, group)?;
        listener.set_nonblocking(true)?;
        let mut listeners = vec![Listener::Unix(listener)];
        let mut active = Vec::new();
        for t in targets {
            match *t {
                Target::PTcp(addr) | Target::PSsl(addr) => {
                    let l = TcpListener::bind(addr)
                        .map_err(|e| std::io::Error::new(e.kind(), format!("{t}: {e}")))?;
                    l.set_nonblocking(true)?;
                    listeners.push(if t.is_tls() {
                        Listener::Tls(l)
                    } else {
                        Listener::Tcp(l)
                    });
                }
                Target::Tcp(addr) | Target::Ssl(addr) => active.push(Active {
                    addr,
                    tls: t.is_tls(),
                    connected: false,
                    next_try: Instant::now(),
                    backoff: BACKOFF_MIN,
                }),
            }
        }
        let (wake_rx, wake_tx) = UnixDatagram::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let (packet_in_tx, packet_in_rx) = sync_channel(PACKET_IN_QUEUE);
        Ok(MgmtServer {
            listeners,
            tls,
            active,
            path: path.to_path_buf(),
            group,
            conns: Vec::new(),
            datapath_id: datapath_id(name),
            packet_in_rx,
            packet_in_tx,
            wake_rx,
            wake_tx: Arc::new(wake_tx),
            bridge: random_uuid()?,
            packet_ins_sent: 0,
            packet_ins_unsent: 0,
            outbox: Vec::new(),
            expired_at: Instant::now(),
            ports: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The workers' end for PACKET_INs (non-blocking: a full queue drops).
    pub fn packet_in_sender(&self) -> PacketInSender {
        PacketInSender {
            tx: self.packet_in_tx.clone(),
            wake: self.wake_tx.clone(),
        }
    }

    /// Wait up to `timeout_ms` for these sockets, the PACKET_IN queue, or
    /// `others` (the control socket's listener, the metrics endpoint's);
    /// serve what is ready here, keep the controller connections up, and
    /// say which of `others` are ready.
    pub fn poll(
        &mut self,
        others: &[BorrowedFd<'_>],
        timeout_ms: u16,
        sw: &mut Switch,
    ) -> Vec<bool> {
        if self.ports.is_none() {
            self.ports_changed(sw);
        }
        self.connect_controllers(sw);
        let (others_ready, listeners_ready, packet_ins, ready) = {
            let mut fds = vec![PollFd::new(self.wake_rx.as_fd(), PollFlags::POLLIN)];
            fds.extend(others.iter().map(|o| PollFd::new(*o, PollFlags::POLLIN)));
            let no = others.len();
            fds.extend(self.listeners.iter().map(|l| {
                let fd = match l {
                    Listener::Unix(l) => l.as_fd(),
                    Listener::Tcp(l) | Listener::Tls(l) => l.as_fd(),
                };
                PollFd::new(fd, PollFlags::POLLIN)
            }));
            fds.extend(
                self.conns
                    .iter()
                    .map(|c| PollFd::new(c.stream.as_fd(), PollFlags::POLLIN)),
            );
            let n = poll(&mut fds, timeout_ms).unwrap_or(0);
            let is = |f: &PollFd| n > 0 && f.revents().is_some_and(|r| !r.is_empty());
            let nl = self.listeners.len();
            let others: Vec<bool> = fds[1..1 + no].iter().map(is).collect();
            let listeners: Vec<bool> = fds[1 + no..1 + no + nl].iter().map(is).collect();
            let ready: Vec<bool> = fds[1 + no + nl..].iter().map(is).collect();
            (others, listeners, is(&fds[0]), ready)
        };
        // Newest last: serve the ready ones back to front so that closing
        // one does not shift the others' places.
        for i in (0..ready.len()).rev() {
            if ready[i] && matches!(self.read(i, sw), Next::Close) {
                self.refused_if_handshaking(i, sw, "the handshake failed");
                self.close(i);
            }
        }
        if packet_ins {
            self.forward_packet_ins();
        }
        if self.expired_at.elapsed() >= EXPIRY_INTERVAL {
            self.expired_at = Instant::now();
            let gone = sw.expire_flows().unwrap_or_default();
            self.outbox.extend(
                gone.iter()
                    .filter(|e| e.flow.send_flow_rem)
                    .map(|e| Async::Of13(handle::flow_removed(e))),
            );
        }
        self.broadcast();
        for (i, ready) in listeners_ready.into_iter().enumerate() {
            if ready {
                self.accept(i);
            }
        }
        self.probe(sw);
        others_ready
    }

    /// A TLS connection closed before its handshake was done is a
    /// controller refused: counted, and logged with its address.
    fn refused_if_handshaking(&mut self, i: usize, sw: &mut Switch, why: &str) {
        let c = &self.conns[i];
        if c.stream.handshaking() {
            refused(sw, c.peer, why);
        }
    }

    /// Take connection `i` away; a `tcp:` controller's is tried again
    /// after the backoff.
    fn close(&mut self, i: usize) {
        let c = self.conns.swap_remove(i);
        if let Some(a) = c.active.and_then(|a| self.active.get_mut(a)) {
            a.connected = false;
            a.next_try = Instant::now() + a.backoff;
        }
    }

    /// Connect to the `tcp:` and `ssl:` controllers that are due; an
    /// `ssl:` one whose TLS fails at once is refused as a failed
    /// handshake is.
    fn connect_controllers(&mut self, sw: &mut Switch) {
        let now = Instant::now();
        for (i, a) in self.active.iter_mut().enumerate() {
            if a.connected || now < a.next_try || self.conns.len() >= MAX_CONNECTIONS {
                continue;
            }
            let stream = TcpStream::connect_timeout(&a.addr, CONNECT_TIMEOUT)
                .and_then(|s| s.set_nodelay(true).map(|()| s))
                .and_then(|s| s.set_nonblocking(true).map(|()| s))
                .and_then(|s| match (&self.tls, a.tls) {
                    (Some(tls), true) => tls.connect(s, a.addr).inspect_err(|e| {
                        refused(sw, Some(a.addr), &format!("the handshake failed: {e}"))
                    }),
                    _ => Ok(Stream::Tcp(s)),
                });
            match stream {
                Ok(s) => {
                    let mut c = Conn::new(s, true, Some(i));
                    c.peer = Some(a.addr);
                    if say_hello(&mut c).is_ok() {
                        a.connected = true;
                        a.backoff = BACKOFF_MIN;
                        self.conns.push(c);
                        continue;
                    }
                    a.next_try = now + a.backoff;
                }
                Err(_) => {
                    a.next_try = now + a.backoff;
                    a.backoff = (a.backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    fn accept(&mut self, li: usize) {
        loop {
            let (stream, peer) = match &self.listeners[li] {
                Listener::Unix(l) => match l.accept() {
                    Ok((s, _)) if check_peer(&s, self.group).is_ok() => (Stream::Unix(s), None),
                    Ok(_) => continue,
                    Err(_) => return,
                },
                Listener::Tcp(l) => match l.accept() {
                    Ok((s, peer)) => (Stream::Tcp(s), Some(peer)),
                    Err(_) => return,
                },
                Listener::Tls(l) => match (l.accept(), &self.tls) {
                    (Ok((s, peer)), Some(tls)) => match tls.accept(s) {
                        Ok(s) => (s, Some(peer)),
                        Err(_) => continue,
                    },
                    (Ok(_), None) => continue,
                    (Err(_), _) => return,
                },
            };
            if let Some(t) = stream.tcp() {
                let _ = t.set_nodelay(true);
            }
            if self.conns.len() >= MAX_CONNECTIONS || stream.set_nonblocking(true).is_err() {
                continue;
            }
            let mut c = Conn::new(stream, peer.is_some(), None);
            c.peer = peer;
            if say_hello(&mut c).is_ok() {
                self.conns.push(c);
            }
        }
    }

    /// Tell the controllers of ports that came or went since they were
    /// last told (PORT_STATUS); the caller calls this after each request
    /// that can change ports (`tunlab ctl add-port`, `del-port`).
    pub fn ports_changed(&mut self, sw: &mut Switch) {
        let Ok(now) = sw.on(0, |n| {
            n.netdev
                .ports()
                .map(|(name, ofport, _, _)| (name.to_string(), ofport))
                .collect::<Vec<_>>()
        }) else {
            return;
        };
        if let Some(before) = &self.ports {
            for (name, no) in &now {
                if !before.contains(&(name.clone(), *no)) {
                    self.outbox.push(Async::PortStatus {
                        reason: of::PPR_ADD,
                        name: name.clone(),
                        no: *no,
                    });
                }
            }
            for (name, no) in before {
                if !now.contains(&(name.clone(), *no)) {
                    self.outbox.push(Async::PortStatus {
                        reason: of::PPR_DELETE,
                        name: name.clone(),
                        no: *no,
                    });
                }
            }
        }
        self.ports = Some(now);
        self.broadcast();
    }

    /// Send what is in the outbox to every connection that takes
    /// asynchronous messages, in its version: PORT_STATUS in 1.3's and
    /// 1.5's layouts, FLOW_REMOVED in 1.3's (not built for 1.0 and 1.5).
    fn broadcast(&mut self) {
        if self.outbox.is_empty() {
            return;
        }
        let msgs = std::mem::take(&mut self.outbox);
        for i in (0..self.conns.len()).rev() {
            let c = &mut self.conns[i];
            let Some(v) = c.version.filter(|_| c.receives_async()) else {
                continue;
            };
            let sent = msgs.iter().all(|a| match a.message(v) {
                Some(m) => send(c, &m).is_ok(),
                None => true,
            });
            if !sent {
                self.close(i);
            }
        }
    }

    /// Hand the workers' PACKET_INs to every connection that takes
    /// asynchronous messages, each in its version and the format it asked
    /// for.
    fn forward_packet_ins(&mut self) {
        let mut buf = [0u8; 64];
        while self.wake_rx.recv(&mut buf).is_ok() {}
        let mut closed = Vec::new();
        while let Ok(q) = self.packet_in_rx.try_recv() {
            let mut sent = false;
            for (i, c) in self.conns.iter_mut().enumerate() {
                let Some(v) = c.version else { continue };
                // Controller ids: a packet_in goes to the connections of
                // the id its action names (0 unless set).
                if !c.receives_async() || q.pin.id != 0 || closed.contains(&i) {
                    continue;
                }
                let m = packet_in_message(&q.pin, &q.frame, self.bridge, v, c.packet_in_format);
                if send(c, &m).is_ok() {
                    sent = true;
                } else {
                    closed.push(i);
                }
            }
            if sent {
                self.packet_ins_sent += 1;
            } else {
                self.packet_ins_unsent += 1;
            }
        }
        closed.sort_unstable();
        for i in closed.into_iter().rev() {
            self.close(i);
        }
    }

    /// Ask idle controllers whether they are there; drop the silent, and
    /// a TLS handshake not done within the probe interval.
    fn probe(&mut self, sw: &mut Switch) {
        let now = Instant::now();
        for i in (0..self.conns.len()).rev() {
            let c = &mut self.conns[i];
            if !c.controller || now.duration_since(c.heard) < PROBE_INTERVAL {
                continue;
            }
            if c.stream.handshaking() {
                refused(sw, c.peer, "no handshake within 5 s");
                self.close(i);
                continue;
            }
            let gone = if c.probed {
                now.duration_since(c.heard) >= 2 * PROBE_INTERVAL
            } else {
                c.probed = true;
                let v = c.version.unwrap_or(of::OF13);
                send(c, &of::header(v, of::ECHO_REQUEST, of::HEADER_LEN, 0)).is_err()
            };
            if gone {
                self.close(i);
            }
        }
    }

    /// Read what connection `i` sent and answer every whole message.
    fn read(&mut self, i: usize, sw: &mut Switch) -> Next {
        let dpid = self.datapath_id;
        let bridge = self.bridge;
        let c = &mut self.conns[i];
        let mut buf = [0u8; 16 * 1024];
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    c.rx.extend_from_slice(&buf[..n]);
                    c.heard = Instant::now();
                    c.probed = false;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            }
            if c.rx.len() > MAX_BUFFERED {
                return Next::Close;
            }
        }
        if say_hello(c).is_err() {
            return Next::Close;
        }
        // The buffer is taken out while its messages are answered (the
        // answers need the connection), and what is left put back.
        let rx = std::mem::take(&mut c.rx);
        let mut used = 0;
        let next = loop {
            match of::frame(&rx[used..]) {
                Ok(Some(n)) => {
                    let at = used;
                    used += n;
                    // `frame` vouched for its length: this always holds.
                    let Ok(m) = Message::new_checked(&rx[at..used]) else {
                        break Next::Close;
                    };
                    if let Next::Close = handle(c, &m, (dpid, bridge), sw, &mut self.outbox) {
                        break Next::Close;
                    }
                }
                Ok(None) => break Next::Keep,
                // No length to skip by: the stream is lost.
                Err(_) => {
                    let v = c.version.unwrap_or(of::OF13);
                    let e = of::error(v, of::ET_BAD_REQUEST, of::BRC_BAD_LEN, 0, &rx[used..]);
                    let _ = send(c, &e);
                    break Next::Close;
                }
            }
        };
        c.rx = rx;
        c.rx.drain(..used);
        next
    }
}

impl Drop for MgmtServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A TLS connection refused (its handshake failed, or did not finish in
/// time): counted, and logged with the peer's address.
fn refused(sw: &mut Switch, peer: Option<SocketAddr>, why: &str) {
    *sw.openflow_refused.entry("tls").or_default() += 1;
    let peer = peer.map(|p| p.to_string()).unwrap_or_default();
    crate::tl_log!(
        Warning,
        "openflow_refused",
        format!("tunlab switch {}: OpenFlow over TLS with {peer} refused: {why}", sw.name);
        node = sw.name,
        peer = peer,
        reason = "tls"
    );
}

/// Both ends say HELLO first, without waiting (1.3 § 6.3.1); on TLS,
/// once the handshake is done (until then this does nothing).
fn say_hello(c: &mut Conn) -> std::io::Result<()> {
    if c.hello_sent || c.stream.handshaking() {
        return Ok(());
    }
    c.hello_sent = true;
    send(c, &of::hello(of::OF15, ours(), 0))
}

/// Send `bytes`; whether the connection stays.
fn reply(c: &mut Conn, bytes: Vec<u8>) -> Next {
    match send(c, &bytes) {
        Ok(()) => Next::Keep,
        Err(_) => Next::Close,
    }
}

/// Refuse message `m` with OpenFlow error (type, code).
fn refuse(c: &mut Conn, v: u8, m: &Message<'_>, (typ, code): (u16, u16)) -> Next {
    reply(c, of::error(v, typ, code, m.xid(), m.bytes()))
}

/// Write a whole message; a peer that does not read is dropped rather
/// than waited for.
fn send(c: &mut Conn, m: &[u8]) -> std::io::Result<()> {
    c.stream.set_nonblocking(false)?;
    c.stream.set_timeouts(Some(Duration::from_millis(500)))?;
    let r = c.stream.write_all(m);
    c.stream.set_nonblocking(true)?;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datapath_ids_are_stable_and_48_bits() {
        assert_eq!(datapath_id("h1"), datapath_id("h1"));
        assert_ne!(datapath_id("h1"), datapath_id("h2"));
        assert!(datapath_id("a-long-node-name") < 1 << 48);
    }
}
