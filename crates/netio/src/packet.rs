//! An AF_PACKET socket on one interface: whole Ethernet frames, for ports
//! that put tags (not IP tunnels) on the underlay, such as QinQ.
//!
//! The kernel strips the outermost 802.1Q/802.1ad tag of a received frame
//! into metadata before packet sockets see it; with `PACKET_AUXDATA` on,
//! [`PacketSocket::recv`] puts it back, so the caller reads the frame as it
//! was on the wire. Frames this socket sent are not received back
//! (`PACKET_IGNORE_OUTGOING`).

use crate::ring::PACKET_IGNORE_OUTGOING;
use crate::udp::set_int_opt;
use nix::libc;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A packet socket bound to one interface.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl PacketSocket {
    /// Open a non-blocking packet socket for every protocol on `ifname`.
    pub fn open(ifname: &str) -> io::Result<PacketSocket> {
        Self::open_proto(ifname, libc::ETH_P_ALL as u16)
    }

    /// A packet socket on `ifname` that only sends: bound to protocol 0,
    /// the kernel gives it no frames (for a worker thread whose frames
    /// from that interface another worker reads).
    pub fn open_send_only(ifname: &str) -> io::Result<PacketSocket> {
        Self::open_proto(ifname, 0)
    }

    fn open_proto(ifname: &str, proto: u16) -> io::Result<PacketSocket> {
        let ifindex = crate::ring::ifindex(ifname)?;
        let proto = proto.to_be();
        // SAFETY: socket() has no memory arguments.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                proto as libc::c_int,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let on: libc::c_int = 1;
        for opt in [libc::PACKET_AUXDATA, PACKET_IGNORE_OUTGOING] {
            set_int_opt(raw, libc::SOL_PACKET, opt, on)?;
        }
        // SAFETY: sockaddr_ll is a plain C struct; all-zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a sockaddr_ll of the length given, alive for the call.
        let r = unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PacketSocket { fd, ifindex })
    }

    /// Keep only the frames received on a CPU whose number is `member`
    /// modulo `group` (one packet socket per worker on one interface,
    /// each taking its share; see `Underlay::share_by_cpu`).
    pub fn share_by_cpu(&self, group: u32, member: u32) -> io::Result<()> {
        crate::udp::attach_filter(
            self.fd.as_raw_fd(),
            libc::SO_ATTACH_FILTER,
            &crate::udp::cpu_share_filter(group, member),
        )
    }

    /// The interface index this socket is bound to.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// Receive one frame into `buf` with its outermost tag restored; `None`
    /// when nothing is waiting. `buf` needs 4 bytes beyond the largest
    /// frame for the tag. Frames longer than `buf` are cut (the length
    /// returned is what was kept).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        if buf.len() < 18 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer under 18 bytes",
            ));
        }
        // Leave 4 bytes at the front so the tag can go back in place.
        let mut iov = libc::iovec {
            iov_base: buf[4..].as_mut_ptr().cast(),
            iov_len: buf.len() - 4,
        };
        let mut ctrl = [0u64; 16];
        // SAFETY: msghdr is a plain C struct; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctrl.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 16]>();
        let n = loop {
            // SAFETY: `msg` points at `iov` (into `buf`) and `ctrl`, both
            // alive and writable for the call, with their lengths.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, 0) };
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(None),
                _ => return Err(e),
            }
        };
        let mut tag = None;
        // SAFETY: the CMSG_* macros walk `msg`'s control buffer within
        // `msg_controllen`, which the kernel set.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
                    let aux: libc::tpacket_auxdata =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    if aux.tp_status & libc::TP_STATUS_VLAN_VALID != 0 {
                        let tpid = if aux.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                            aux.tp_vlan_tpid
                        } else {
                            0x8100
                        };
                        tag = Some((tpid, aux.tp_vlan_tci));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if n < 12 {
            buf.copy_within(4..4 + n, 0);
            return Ok(Some(n));
        }
        match tag {
            Some((tpid, tci)) => {
                // Addresses move 4 bytes forward; the tag goes after them.
                buf.copy_within(4..16, 0);
                buf[12..14].copy_from_slice(&tpid.to_be_bytes());
                buf[14..16].copy_from_slice(&tci.to_be_bytes());
                Ok(Some(n + 4))
            }
            None => {
                buf.copy_within(4..4 + n, 0);
                Ok(Some(n))
            }
        }
    }

    /// Put a virtio-net header (10 bytes) before every frame sent, so that
    /// a frame may be a super-frame for the kernel to segment (TSO) with
    /// its checksum partial (`PACKET_VNET_HDR`).
    pub fn enable_vnet_hdr(&self) -> io::Result<()> {
        set_int_opt(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_VNET_HDR,
            1,
        )
    }

    /// Send one frame gathered from `parts` (with `enable_vnet_hdr`, the
    /// first 10 bytes are the virtio-net header). Returns false if the
    /// interface's queue is full.
    pub fn send_vectored(&self, parts: &[io::IoSlice<'_>]) -> io::Result<bool> {
        loop {
            // SAFETY: IoSlice is ABI-compatible with iovec; every part is
            // readable for its length during the call.
            let n = unsafe {
                libc::writev(
                    self.fd.as_raw_fd(),
                    parts.as_ptr().cast(),
                    parts.len() as libc::c_int,
                )
            };
            if n >= 0 {
                return Ok(true);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => return Ok(false),
                _ => return Err(e),
            }
        }
    }

    /// Send one whole frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        loop {
            // SAFETY: `frame` is readable for its length during the call.
            let n =
                unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if n >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
