//! The underlay UDP socket for Geneve and VXLAN: batch-first.
//!
//! Receive moves up to a batch of datagrams per `recvmmsg` call, with UDP
//! GRO on, so the kernel may hand over several same-flow datagrams
//! coalesced in one buffer together with their segment size (a "stride").
//! Send moves a batch per `sendmmsg` call. EINTR is handled in one place.

use nix::libc;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

/// The largest datagram the kernel coalesces with GRO.
pub const GRO_BUF: usize = 65535;
const SOL_UDP: libc::c_int = 17;
const UDP_GRO: libc::c_int = 104;
const UDP_SEGMENT: libc::c_int = 103;
/// Send and receive buffer asked for an underlay socket.
const SOCKET_BUF: libc::c_int = 4 << 20;
/// Datagrams per `sendmmsg` call.
pub const SEND_BATCH: usize = 64;
/// The most datagrams one UDP GSO send may make (UDP_MAX_SEGMENTS).
pub const GSO_MAX_SEGMENTS: usize = 64;
const UDP_NO_CHECK6_TX: libc::c_int = 101;
const UDP_NO_CHECK6_RX: libc::c_int = 102;

/// Buffers and kernel headers for one `recvmmsg` call, allocated once.
/// The headers point into the buffers, so nothing here moves after `new`.
pub struct RecvBatch {
    bufs: Vec<Box<[u8]>>,
    iov: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    ctrl: Vec<[u64; 12]>,
    hdrs: Vec<libc::mmsghdr>,
    /// Per received message: bytes, and the GRO segment size (0 if the
    /// buffer holds one datagram).
    lens: Vec<usize>,
    strides: Vec<u16>,
    /// Per received message: the address it was sent to, on sockets bound
    /// to the wildcard address (IP_PKTINFO); `None` otherwise.
    dsts: Vec<Option<IpAddr>>,
    n: usize,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("slots", &self.bufs.len())
            .field("received", &self.n)
            .finish()
    }
}

// SAFETY: the raw pointers inside `iov` and `hdrs` point only into this
// struct's own heap buffers; moving the struct to another thread moves
// those buffers with it.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// `slots` messages of up to `buf_len` bytes each.
    pub fn new(slots: usize, buf_len: usize) -> RecvBatch {
        let slots = slots.max(1);
        let mut b = RecvBatch {
            bufs: (0..slots)
                .map(|_| vec![0u8; buf_len].into_boxed_slice())
                .collect(),
            // SAFETY: iovec, sockaddr_storage and mmsghdr are plain C
            // structs for which all-zero bytes are a valid value.
            iov: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            // SAFETY: as above.
            addrs: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            ctrl: vec![[0u64; 12]; slots],
            // SAFETY: as above.
            hdrs: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            lens: vec![0; slots],
            strides: vec![0; slots],
            dsts: vec![None; slots],
            n: 0,
        };
        for i in 0..slots {
            b.iov[i].iov_base = b.bufs[i].as_mut_ptr().cast();
            b.iov[i].iov_len = b.bufs[i].len();
        }
        b
    }

    /// Messages from the last receive.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Message `i`: its bytes, GRO segment size (0 = one datagram), sender.
    pub fn get(&self, i: usize) -> Option<(&[u8], u16, Option<SocketAddr>)> {
        if i >= self.n {
            return None;
        }
        Some((
            &self.bufs[i][..self.lens[i]],
            self.strides[i],
            sockaddr_to_std(&self.addrs[i]),
        ))
    }

    /// The local address message `i` was sent to, if the socket is bound
    /// to the wildcard address (the tunnel's `tun_dst` on receive).
    pub fn dst(&self, i: usize) -> Option<IpAddr> {
        if i >= self.n {
            return None;
        }
        self.dsts[i]
    }

    /// Mutable access to message `i`'s buffer, e.g. to decapsulate in place.
    pub fn buf_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        if i >= self.n {
            return None;
        }
        let len = self.lens[i];
        Some(&mut self.bufs[i][..len])
    }
}

fn sockaddr_to_std(a: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match a.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, and
            // sockaddr_storage is large and aligned enough for it.
            let v4 = unsafe { &*(a as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                u32::from_be(v4.sin_addr.s_addr).into(),
                u16::from_be(v4.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let v6 = unsafe { &*(a as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                v6.sin6_addr.s6_addr.into(),
                u16::from_be(v6.sin6_port),
                v6.sin6_flowinfo,
                v6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn std_to_sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut s: libc::sockaddr_storage = unsafe { zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large and aligned enough for a
            // sockaddr_in, and we write only through this typed reference.
            let sin = unsafe {
                &mut *(&mut s as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            (s, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe {
                &mut *(&mut s as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_scope_id = v6.scope_id();
            (s, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

/// A non-blocking underlay socket: UDP for Geneve and VXLAN, or raw IP
/// (protocol 47) for GRE and NVGRE, where the kernel builds the outer IPv4
/// header and receive hands over the whole IPv4 packet.
#[derive(Debug)]
pub struct Underlay {
    sock: UdpSocket,
    gro: bool,
    raw: bool,
}

impl Underlay {
    /// Bind `local` (e.g. `0.0.0.0:6081`), non-blocking, with UDP GRO if the
    /// kernel offers it.
    pub fn bind(local: SocketAddr) -> io::Result<Underlay> {
        Self::bind_with(local, false)
    }

    /// As [`Underlay::bind`], but one of a group of sockets on the same
    /// address (`SO_REUSEPORT`), one per worker thread; the kernel hands
    /// each datagram to one of them (see [`Underlay::steer_by_cpu`]).
    /// The first of a group fails, as `bind` does, if anyone else holds
    /// the address without being part of a group.
    pub fn bind_shared(local: SocketAddr) -> io::Result<Underlay> {
        Self::bind_with(local, true)
    }

    fn bind_with(local: SocketAddr, reuse_port: bool) -> io::Result<Underlay> {
        use nix::sys::socket::{
            bind, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage,
        };
        let family = if local.is_ipv6() {
            AddressFamily::Inet6
        } else {
            AddressFamily::Inet
        };
        let fd = socket(
            family,
            SockType::Datagram,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )?;
        if reuse_port {
            setsockopt(&fd, sockopt::ReusePort, &true)?;
        }
        bind(fd.as_raw_fd(), &SockaddrStorage::from(local))?;
        let sock = UdpSocket::from(fd);
        let on: libc::c_int = 1;
        let gro = set_int_opt(sock.as_raw_fd(), SOL_UDP, UDP_GRO, on).is_ok();
        // Room for a few 64 KB GSO sends and GRO receives: the defaults
        // (about 200 KB) overflow at one super-frame burst. Root may
        // exceed the system maximum; anyone else gets what it allows.
        for (force, plain) in [
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        ] {
            if set_int_opt(sock.as_raw_fd(), libc::SOL_SOCKET, force, SOCKET_BUF).is_err() {
                let _ = set_int_opt(sock.as_raw_fd(), libc::SOL_SOCKET, plain, SOCKET_BUF);
            }
        }
        if local.is_ipv6() {
            // RFC 6935: over IPv6 a zero UDP checksum is accepted only by
            // sockets that opt in; tunnel peers (OVS, tunlab with csum off)
            // send zero.
            set_int_opt(sock.as_raw_fd(), SOL_UDP, UDP_NO_CHECK6_RX, on)?;
        }
        if local.ip().is_unspecified() {
            // Bound to every address: ask which one each datagram was for.
            let (level, opt) = if local.is_ipv6() {
                (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO)
            } else {
                (libc::IPPROTO_IP, libc::IP_PKTINFO)
            };
            set_int_opt(sock.as_raw_fd(), level, opt, on)?;
        }
        Ok(Underlay {
            sock,
            gro,
            raw: false,
        })
    }

    /// Give each datagram to the socket of the group whose index is the
    /// number of the CPU that received it, modulo `group`: with worker
    /// `i` pinned to CPU `i`, a datagram is handled where the kernel
    /// received it (and, over a veth, where its sender ran). The group is
    /// this socket's `SO_REUSEPORT` group; its sockets are numbered in
    /// the order they were bound.
    pub fn steer_by_cpu(&self, group: u32) -> io::Result<()> {
        // ld cpu; A %= group; ret A
        let prog = [
            bpf_insn(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_CPU),
            bpf_insn(BPF_ALU | BPF_MOD | BPF_K, group.max(1)),
            bpf_insn(BPF_RET | BPF_A, 0),
        ];
        attach_filter(self.sock.as_raw_fd(), SO_ATTACH_REUSEPORT_CBPF, &prog)
    }

    /// Keep only the packets received on a CPU whose number is `member`
    /// modulo `group`: for raw sockets of one protocol, one per worker,
    /// where the kernel gives every socket a copy and each worker must
    /// take its own share (see [`cpu_share_filter`]).
    pub fn share_by_cpu(&self, group: u32, member: u32) -> io::Result<()> {
        attach_filter(
            self.sock.as_raw_fd(),
            libc::SO_ATTACH_FILTER,
            &cpu_share_filter(group, member),
        )
    }

    /// A raw IPv4 socket for IP protocol `proto` (47 for GRE) bound to
    /// `local`, non-blocking. Receive returns whole IPv4 packets.
    pub fn raw_ipv4(local: std::net::Ipv4Addr, proto: u8) -> io::Result<Underlay> {
        // SAFETY: socket() has no memory arguments.
        let fd = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                proto as libc::c_int,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new socket that nothing else owns; a UdpSocket
        // is only a descriptor wrapper, and only fd-level calls
        // (recvmmsg, sendmmsg, poll) are made on it.
        let sock = unsafe { <UdpSocket as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let (addr, len) = std_to_sockaddr(&SocketAddr::new(local.into(), 0));
        // SAFETY: `addr` is a sockaddr_in of length `len`, alive for the call.
        if unsafe { libc::bind(fd, (&addr as *const libc::sockaddr_storage).cast(), len) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Underlay {
            sock,
            gro: false,
            raw: true,
        })
    }

    /// Let the kernel fragment outer packets larger than the path MTU
    /// (clear DF), as the kernel's Geneve and GRE devices do by default;
    /// without it the kernel refuses such a send with EMSGSIZE.
    pub fn allow_fragmentation(&self) -> io::Result<()> {
        let (level, opt, val) = match self.sock.local_addr()? {
            SocketAddr::V4(_) => (
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_DONT,
            ),
            SocketAddr::V6(_) => (
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU_DISCOVER,
                libc::IPV6_PMTUDISC_DONT,
            ),
        };
        set_int_opt(self.sock.as_raw_fd(), level, opt, val)
    }

    /// Is this a raw IP socket (receive includes the IPv4 header)?
    pub fn is_raw(&self) -> bool {
        self.raw
    }

    /// Send with a zero outer UDP checksum (`false`) or let the kernel
    /// compute it (`true`, the socket default). A zero checksum is allowed
    /// for tunnels (RFC 7348, RFC 8926; RFC 6935 over IPv6) and is what
    /// Open vSwitch sends by default. Over a veth a kernel-computed checksum
    /// stays partial, which a peer reading raw frames (OVS) refuses.
    pub fn set_tx_checksum(&self, on: bool) -> io::Result<()> {
        let off: libc::c_int = (!on) as libc::c_int;
        let (level, opt) = match self.sock.local_addr()? {
            SocketAddr::V4(_) => (libc::SOL_SOCKET, libc::SO_NO_CHECK),
            SocketAddr::V6(_) => (SOL_UDP, UDP_NO_CHECK6_TX),
        };
        set_int_opt(self.sock.as_raw_fd(), level, opt, off)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Is UDP GRO on?
    pub fn gro(&self) -> bool {
        self.gro
    }

    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Receive up to a batch of messages; returns how many (0 when none
    /// are waiting).
    pub fn recv_batch(&self, b: &mut RecvBatch) -> io::Result<usize> {
        let slots = b.bufs.len();
        for i in 0..slots {
            b.hdrs[i].msg_hdr.msg_name = (&mut b.addrs[i] as *mut libc::sockaddr_storage).cast();
            b.hdrs[i].msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            b.hdrs[i].msg_hdr.msg_iov = &mut b.iov[i];
            b.hdrs[i].msg_hdr.msg_iovlen = 1;
            b.hdrs[i].msg_hdr.msg_control = b.ctrl[i].as_mut_ptr().cast();
            b.hdrs[i].msg_hdr.msg_controllen = size_of::<[u64; 12]>() as _;
            b.hdrs[i].msg_hdr.msg_flags = 0;
            b.hdrs[i].msg_len = 0;
        }
        let n = retry_eintr(|| {
            // SAFETY: `hdrs` holds `slots` initialised mmsghdr whose name,
            // iov and control pointers point into buffers owned by `b`
            // that outlive the call and are as long as the lengths say.
            unsafe {
                libc::recvmmsg(
                    self.sock.as_raw_fd(),
                    b.hdrs.as_mut_ptr(),
                    slots as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            }
        });
        let n = match n {
            Ok(n) => n as usize,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        for i in 0..n {
            b.lens[i] = b.hdrs[i].msg_len as usize;
            (b.strides[i], b.dsts[i]) = control_messages(&b.hdrs[i].msg_hdr);
        }
        b.n = n;
        Ok(n)
    }

    /// Send each `(bytes, destination)` with `sendmmsg`, up to
    /// [`SEND_BATCH`] per call (the kernel headers live on the stack: no
    /// allocation); returns how many were sent before a full queue
    /// stopped it.
    pub fn send_batch<'a>(
        &self,
        msgs: impl IntoIterator<Item = (&'a [u8], SocketAddr)>,
    ) -> io::Result<usize> {
        let mut msgs = msgs.into_iter().peekable();
        let mut total = 0;
        while msgs.peek().is_some() {
            type Addr = (libc::sockaddr_storage, libc::socklen_t);
            // SAFETY: all-zero is a valid sockaddr_storage, iovec and
            // mmsghdr (plain C structs, null pointers); the pointers are
            // set below before use.
            let mut addrs: [Addr; SEND_BATCH] = unsafe { zeroed() };
            // SAFETY: as above.
            let mut iov: [libc::iovec; SEND_BATCH] = unsafe { zeroed() };
            // SAFETY: as above.
            let mut hdrs: [libc::mmsghdr; SEND_BATCH] = unsafe { zeroed() };
            let mut n = 0;
            while n < SEND_BATCH {
                let Some((b, a)) = msgs.next() else { break };
                addrs[n] = std_to_sockaddr(&a);
                iov[n] = libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                };
                n += 1;
            }
            for i in 0..n {
                hdrs[i].msg_hdr.msg_name = (&mut addrs[i].0 as *mut libc::sockaddr_storage).cast();
                hdrs[i].msg_hdr.msg_namelen = addrs[i].1;
                hdrs[i].msg_hdr.msg_iov = &mut iov[i];
                hdrs[i].msg_hdr.msg_iovlen = 1;
            }
            let mut sent = 0;
            while sent < n {
                let r = retry_eintr(|| {
                    // SAFETY: `hdrs[sent..n]` are initialised and point at
                    // `iov` and `addrs`, which point at the caller's
                    // buffers; all outlive the call. The kernel only reads
                    // the payloads.
                    unsafe {
                        libc::sendmmsg(
                            self.sock.as_raw_fd(),
                            hdrs[sent..n].as_mut_ptr(),
                            (n - sent) as libc::c_uint,
                            libc::MSG_DONTWAIT,
                        )
                    }
                });
                match r {
                    Ok(k) => sent += k as usize,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(total + sent),
                    Err(e) => return Err(e),
                }
            }
            total += sent;
        }
        Ok(total)
    }
}

impl Underlay {
    /// Send the bytes of `parts`, in order, to `dst` as datagrams of
    /// `seg_len` bytes each (the last may be shorter): one `sendmsg` with
    /// `UDP_SEGMENT`, the kernel cutting the datagrams (UDP GSO). At most
    /// [`GSO_MAX_SEGMENTS`] datagrams and 65535 bytes in all. Returns
    /// false if the socket's queue is full (nothing sent).
    pub fn send_segmented(
        &self,
        parts: &[io::IoSlice<'_>],
        dst: SocketAddr,
        seg_len: u16,
    ) -> io::Result<bool> {
        let (mut addr, addr_len) = std_to_sockaddr(&dst);
        let mut ctrl = [0u64; 4];
        // SAFETY: all-zero is a valid msghdr; every pointer set below
        // points at a local that outlives the sendmsg call.
        let mut h: libc::msghdr = unsafe { zeroed() };
        h.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
        h.msg_namelen = addr_len;
        // IoSlice is ABI-compatible with iovec (std guarantees it on Unix).
        h.msg_iov = parts.as_ptr() as *mut libc::iovec;
        h.msg_iovlen = parts.len() as _;
        h.msg_control = ctrl.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        h.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as _;
        // SAFETY: the control buffer is 32 bytes, aligned for cmsghdr and
        // longer than CMSG_SPACE(2); CMSG_FIRSTHDR/CMSG_DATA stay inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&h);
            (*c).cmsg_level = SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg_len);
        }
        let r = retry_eintr(|| {
            // SAFETY: `h` points at `addr`, `parts` (read only) and `ctrl`,
            // all alive for the call.
            unsafe { libc::sendmsg(self.sock.as_raw_fd(), &h, libc::MSG_DONTWAIT) as libc::c_int }
        });
        match r {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// What the control messages say: the UDP_GRO segment size (0 if none)
/// and the IP_PKTINFO / IPV6_PKTINFO destination address, if present.
fn control_messages(h: &libc::msghdr) -> (u16, Option<IpAddr>) {
    let (mut stride, mut dst) = (0, None);
    // SAFETY: `h` was filled by recvmmsg; the CMSG_* macros walk its
    // control buffer within `msg_controllen` as the kernel wrote it, and
    // each payload is read unaligned as the type its level and type say.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (SOL_UDP, UDP_GRO) => {
                    stride = std::ptr::read_unaligned(data.cast::<libc::c_int>()) as u16;
                }
                (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                    let pi = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                    dst = Some(IpAddr::V4(u32::from_be(pi.ipi_addr.s_addr).into()));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    let pi = std::ptr::read_unaligned(data.cast::<libc::in6_pktinfo>());
                    dst = Some(IpAddr::V6(pi.ipi6_addr.s6_addr.into()));
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    (stride, dst)
}

// Classic BPF, as <linux/filter.h> numbers it.
const BPF_LD: u16 = 0x00;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_ALU: u16 = 0x04;
const BPF_MOD: u16 = 0x90;
const BPF_K: u16 = 0x00;
const BPF_RET: u16 = 0x06;
const BPF_A: u16 = 0x10;
const SKF_AD_OFF: u32 = (-0x1000i32) as u32;
const SKF_AD_CPU: u32 = 36;
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

const BPF_JMP: u16 = 0x05;
const BPF_JEQ: u16 = 0x10;

/// A socket filter that accepts a packet whole if the number of the CPU
/// receiving it is `member` modulo `group`, and drops it otherwise:
/// `ld cpu; A %= group; jeq member ? ret -1 : ret 0`. Every member of a
/// group of sockets that all see the same packets (raw IP, AF_PACKET)
/// keeps a different share, and together they keep each packet once.
pub(crate) fn cpu_share_filter(group: u32, member: u32) -> [libc::sock_filter; 5] {
    let group = group.max(1);
    [
        bpf_insn(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_CPU),
        bpf_insn(BPF_ALU | BPF_MOD | BPF_K, group),
        libc::sock_filter {
            code: BPF_JMP | BPF_JEQ | BPF_K,
            jt: 0,
            jf: 1,
            k: member % group,
        },
        bpf_insn(BPF_RET | BPF_K, u32::MAX),
        bpf_insn(BPF_RET | BPF_K, 0),
    ]
}

fn bpf_insn(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// Attach a classic BPF program with socket option `opt` (SOL_SOCKET).
pub(crate) fn attach_filter(
    fd: libc::c_int,
    opt: libc::c_int,
    prog: &[libc::sock_filter],
) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    // The kernel copies the program `fprog` points to, which lives (with
    // `prog`) for the call.
    set_opt(fd, libc::SOL_SOCKET, opt, &fprog)
}

/// Set an integer socket option.
pub(crate) fn set_int_opt(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    val: libc::c_int,
) -> io::Result<()> {
    set_opt(fd, level, opt, &val)
}

/// Set a socket option whose value is the plain C struct or integer
/// `val`: the one place `setsockopt` is called.
fn set_opt<T>(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    val: &T,
) -> io::Result<()> {
    // SAFETY: setsockopt reads size_of::<T>() bytes from `val`, which lives
    // for the call; an invalid descriptor or option is reported as an error.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The one place EINTR is retried.
fn retry_eintr(mut f: impl FnMut() -> libc::c_int) -> io::Result<libc::c_int> {
    loop {
        let r = f();
        if r >= 0 {
            return Ok(r);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A reuse-port group steered by CPU: a datagram sent from a thread
    /// on CPU c arrives at the group's socket c (loopback receives on the
    /// sending CPU); a plain bind of the same address is refused.
    #[test]
    fn shared_sockets_are_steered_by_cpu() {
        let first = Underlay::bind_shared("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = first.local_addr().unwrap();
        let second = Underlay::bind_shared(addr).unwrap();
        first.steer_by_cpu(2).unwrap();
        assert!(Underlay::bind(addr).is_err(), "outside the group");
        let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
        let mut b = RecvBatch::new(4, GRO_BUF);
        for cpu in 0..cpus.min(2) {
            std::thread::spawn(move || {
                crate::cpu::pin_current_thread(cpu).unwrap();
                let tx = Underlay::bind("127.0.0.1:0".parse().unwrap()).unwrap();
                tx.send_batch([(&[cpu as u8; 8][..], addr)]).unwrap();
            })
            .join()
            .unwrap();
            let want = [&first, &second][cpu];
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut n = 0;
            while n == 0 && Instant::now() < deadline {
                n = want.recv_batch(&mut b).unwrap();
            }
            assert_eq!(n, 1, "sent from CPU {cpu}, received by socket {cpu}");
            assert_eq!(b.get(0).unwrap().0, &[cpu as u8; 8]);
        }
    }

    #[test]
    fn raw_sockets_share_packets_by_cpu() {
        // Needs root (raw sockets). IP protocol 253 is for experiments
        // (RFC 3692): nothing else on the host uses it.
        let lo = std::net::Ipv4Addr::LOCALHOST;
        let socks = [
            Underlay::raw_ipv4(lo, 253).unwrap(),
            Underlay::raw_ipv4(lo, 253).unwrap(),
        ];
        for (i, s) in socks.iter().enumerate() {
            s.share_by_cpu(2, i as u32).unwrap();
        }
        let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
        let mut b = RecvBatch::new(4, GRO_BUF);
        for cpu in 0..cpus.min(2) {
            std::thread::spawn(move || {
                crate::cpu::pin_current_thread(cpu).unwrap();
                let tx = Underlay::raw_ipv4(lo, 253).unwrap();
                let to = SocketAddr::new(lo.into(), 0);
                tx.send_batch([(&[0xc0 + cpu as u8; 8][..], to)]).unwrap();
            })
            .join()
            .unwrap();
            let (want, other) = (&socks[cpu], &socks[1 - cpu]);
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut n = 0;
            while n == 0 && Instant::now() < deadline {
                n = want.recv_batch(&mut b).unwrap();
            }
            assert_eq!(n, 1, "sent from CPU {cpu}, kept by socket {cpu}");
            // A raw IPv4 socket reads the IP header too.
            assert!(b.get(0).unwrap().0.ends_with(&[0xc0 + cpu as u8; 8]));
            assert_eq!(
                other.recv_batch(&mut b).unwrap(),
                0,
                "socket {} kept it too",
                1 - cpu
            );
        }
    }

    #[test]
    fn cpu_share_filters_split_a_group_between_members() {
        let f = cpu_share_filter(3, 5);
        assert_eq!(f[1].k, 3, "A %= group");
        assert_eq!(
            (f[2].k, f[2].jt, f[2].jf),
            (2, 0, 1),
            "member taken modulo group"
        );
        assert_eq!((f[3].k, f[4].k), (u32::MAX, 0), "accept whole, else drop");
        assert_eq!(cpu_share_filter(0, 0)[1].k, 1, "no division by zero");
    }

    #[test]
    fn batch_round_trip_on_loopback() {
        let rx = Underlay::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let tx = Underlay::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let dst = rx.local_addr().unwrap();
        let payloads: Vec<Vec<u8>> = (0..150u8).map(|i| vec![i; 100 + i as usize]).collect();
        let msgs: Vec<(&[u8], SocketAddr)> = payloads.iter().map(|p| (&p[..], dst)).collect();
        assert_eq!(tx.send_batch(msgs.iter().copied()).unwrap(), 150); // more than one sendmmsg call
        let mut b = RecvBatch::new(8, GRO_BUF);
        let mut got: Vec<Vec<u8>> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < 150 && Instant::now() < deadline {
            let n = rx.recv_batch(&mut b).unwrap();
            for i in 0..n {
                let (data, stride, from) = b.get(i).unwrap();
                assert_eq!(from, Some(tx.local_addr().unwrap()));
                // Datagrams of different sizes are never coalesced, but be
                // ready for it: split on the stride.
                if stride == 0 {
                    got.push(data.to_vec());
                } else {
                    got.extend(data.chunks(stride as usize).map(<[u8]>::to_vec));
                }
            }
            if n == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(got, payloads);
        assert_eq!(rx.recv_batch(&mut b).unwrap(), 0);
    }

    /// One UDP GSO send from header/payload pieces arrives as datagrams
    /// cut at the segment length, whatever the pieces' boundaries.
    #[test]
    fn segmented_send_arrives_as_datagrams() {
        let rx = Underlay::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let tx = Underlay::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let dst = rx.local_addr().unwrap();
        let hdrs: Vec<[u8; 10]> = (0..5u8).map(|i| [i; 10]).collect();
        let body = vec![0xeeu8; 90 * 5];
        let mut parts = Vec::new();
        for (i, h) in hdrs.iter().enumerate() {
            parts.push(io::IoSlice::new(h));
            let end = if i == 4 { 90 * 4 + 40 } else { 90 * (i + 1) };
            parts.push(io::IoSlice::new(&body[90 * i..end]));
        }
        assert!(tx.send_segmented(&parts, dst, 100).unwrap());
        let mut b = RecvBatch::new(8, GRO_BUF);
        let mut got: Vec<Vec<u8>> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < 5 && Instant::now() < deadline {
            let n = rx.recv_batch(&mut b).unwrap();
            for i in 0..n {
                let (data, stride, _) = b.get(i).unwrap();
                let stride = if stride == 0 {
                    data.len()
                } else {
                    stride as usize
                };
                got.extend(data.chunks(stride).map(<[u8]>::to_vec));
            }
            if n == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(got.len(), 5);
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d.len(), if i == 4 { 50 } else { 100 });
            assert_eq!(d[..10], [i as u8; 10]);
        }
    }

    /// A socket bound to the wildcard address learns each datagram's
    /// destination; one bound to an address does not need to.
    #[test]
    fn wildcard_socket_reports_destination() {
        let rx = Underlay::bind("0.0.0.0:0".parse().unwrap()).unwrap();
        let port = rx.local_addr().unwrap().port();
        let tx = Underlay::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let to: SocketAddr = format!("127.0.0.3:{port}").parse().unwrap();
        assert_eq!(tx.send_batch([(&b"x"[..], to)]).unwrap(), 1);
        let mut b = RecvBatch::new(4, 2048);
        let deadline = Instant::now() + Duration::from_secs(5);
        while rx.recv_batch(&mut b).unwrap() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(b.dst(0), Some("127.0.0.3".parse().unwrap()));
        assert_eq!(b.get(0).unwrap().0, b"x");
    }
}
