//! AF_PACKET rings: frames shared with the kernel through `mmap`, so a
//! traffic generator hands over and takes back thousands of frames per
//! system call instead of one.
//!
//! - [`TxRing`]: `PACKET_TX_RING` with `TPACKET_V2` frames and
//!   `PACKET_QDISC_BYPASS` (frames go straight to the driver, as trafgen
//!   and TRex's Linux mode do). The caller fills frames, marks them
//!   `TP_STATUS_SEND_REQUEST`, and one `send()` transmits every marked one.
//! - [`RxRing`]: `PACKET_RX_RING` with `TPACKET_V3` blocks: the kernel
//!   fills a block with many frames and hands the whole block over; frames
//!   this host sent are not seen (`PACKET_IGNORE_OUTGOING`).
//! - [`FrameRxRing`]: `PACKET_RX_RING` with `TPACKET_V2` frames, each
//!   handed over as soon as it arrives (no block to fill or time out).
//!
//! Layout of one TX frame (`TPACKET_V2`, no `PACKET_TX_HAS_OFF`):
//!
//! ```text
//! 0                      32                                frame_size
//! ┌──────────────────────┬──────────────────────────────────────┐
//! │ tpacket2_hdr (align) │ Ethernet frame (tp_len bytes)        │
//! └──────────────────────┴──────────────────────────────────────┘
//! ```

use crate::udp::set_int_opt;
use nix::libc;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// `PACKET_IGNORE_OUTGOING` (Linux 4.20), not in every libc crate.
pub(crate) const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// Where the frame starts inside a TX ring slot: the header, aligned.
const TX_DATA: usize = (size_of::<libc::tpacket2_hdr>() + libc::TPACKET_ALIGNMENT - 1)
    & !(libc::TPACKET_ALIGNMENT - 1);

/// The index of `ifname` in the calling thread's network namespace.
pub(crate) fn ifindex(ifname: &str) -> io::Result<i32> {
    let name = std::ffi::CString::new(ifname)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
    // SAFETY: if_nametoindex reads the NUL-terminated name only.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
    if i == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface named '{ifname}' in this network namespace"),
        ));
    }
    Ok(i)
}

fn packet_socket(proto: u16) -> io::Result<OwnedFd> {
    // SAFETY: socket() has no memory arguments.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            proto.to_be() as libc::c_int,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn set_opt<T>(fd: &OwnedFd, opt: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: setsockopt reads size_of::<T>() bytes from `val`, which lives
    // for the call.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
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

fn bind(fd: &OwnedFd, ifindex: i32, proto: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is a plain C struct; all-zero is valid.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a sockaddr_ll of the length given, alive for the call.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A packet socket for every protocol, in ring version `version`, that
/// ignores what this host sends, with the RX ring `req` mapped
/// (`len` bytes) and bound to `ifname`.
fn rx_socket<T>(
    ifname: &str,
    version: libc::c_int,
    req: &T,
    len: usize,
) -> io::Result<(OwnedFd, Map)> {
    let ifi = ifindex(ifname)?;
    let proto = libc::ETH_P_ALL as u16;
    let fd = packet_socket(proto)?;
    set_int_opt(
        fd.as_raw_fd(),
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        version,
    )?;
    set_int_opt(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
    set_opt(&fd, libc::PACKET_RX_RING, req)?;
    let map = Map::new(&fd, len)?;
    bind(&fd, ifi, proto)?;
    Ok((fd, map))
}

/// Hand the ring's ready slots (from `*next`, of `n`) to `take` until one
/// is not ready, waiting up to `timeout_ms` once if the first is not; each
/// slot goes back to the kernel after `take`. `status(i)` is slot `i`'s
/// status word; `take(i)` returns the frames slot `i` held.
fn drain_ready<'m>(
    fd: &OwnedFd,
    timeout_ms: i32,
    next: &mut usize,
    n: usize,
    status: impl Fn(usize) -> &'m AtomicU32,
    mut take: impl FnMut(usize) -> usize,
) -> io::Result<usize> {
    let mut seen = 0;
    let mut waited = false;
    loop {
        let st = status(*next);
        if st.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            if waited || seen > 0 {
                return Ok(seen);
            }
            wait_readable(fd, timeout_ms)?;
            waited = true;
            continue;
        }
        seen += take(*next);
        st.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        *next = (*next + 1) % n;
    }
}

/// Wait up to `timeout_ms` for `fd` to have something to read (an
/// interrupted wait counts as a wait).
fn wait_readable(fd: &OwnedFd, timeout_ms: i32) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN | libc::POLLERR,
        revents: 0,
    };
    // SAFETY: one pollfd, alive for the call.
    let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    Ok(())
}

/// A received frame from its ring header's fields (V2 and V3 name them
/// alike): the tag the kernel took off, the length on the wire, the time.
fn rx_frame(
    data: &[u8],
    status: u32,
    tpid: u16,
    tci: u16,
    len: u32,
    sec: u32,
    nsec: u32,
) -> RxFrame<'_> {
    let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
        let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
            tpid
        } else {
            0x8100
        };
        (tpid, tci)
    });
    RxFrame {
        data,
        wire_len: len as usize + if vlan.is_some() { 4 } else { 0 },
        vlan,
        ts_ns: sec as u64 * 1_000_000_000 + nsec as u64,
    }
}

/// A shared mapping of a ring, unmapped on drop.
#[derive(Debug)]
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    fn new(fd: &OwnedFd, len: usize) -> io::Result<Map> {
        // SAFETY: a fresh shared mapping of the socket's ring; the kernel
        // checks `len` against the ring it set up.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Map { ptr: p.cast(), len })
    }

    /// The status word at `off` (the first field of every ring header),
    /// shared with the kernel.
    fn status(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off + 4 <= self.len && off.is_multiple_of(4));
        // SAFETY: `off` is a slot or block start inside the mapping (the
        // callers compute it from the ring geometry), 4-aligned because
        // slots are TPACKET_ALIGNMENT-aligned; the kernel and we access
        // the word only atomically.
        unsafe { &*(self.ptr.add(off) as *const AtomicU32) }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `new`.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

// SAFETY: the mapping is owned by one ring object and only reached through
// `&mut self` (TX) or `&self` reads of kernel-released blocks (RX).
unsafe impl Send for Map {}

/// A transmit ring on one interface.
#[derive(Debug)]
pub struct TxRing {
    fd: OwnedFd,
    map: Map,
    slot: usize,
    slots: usize,
    next: usize,
    queued: usize,
}

impl TxRing {
    /// A ring of `slots` frames of up to `max_frame` bytes each on
    /// `ifname`, bypassing the qdisc.
    pub fn open(ifname: &str, max_frame: usize, slots: usize) -> io::Result<TxRing> {
        let ifi = ifindex(ifname)?;
        // Protocol 0: this socket only sends, it hooks no receive path.
        let fd = packet_socket(0)?;
        set_int_opt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V2 as libc::c_int,
        )?;
        set_int_opt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            1,
        )?;
        // At most 32 MiB of ring (jumbo slots are 16 KiB).
        let (slot, slots, req) = frame_ring(TX_DATA + max_frame, slots, 32 << 20);
        set_opt(&fd, libc::PACKET_TX_RING, &req)?;
        let map = Map::new(&fd, slot * slots)?;
        bind(&fd, ifi, 0)?;
        Ok(TxRing {
            fd,
            map,
            slot,
            slots,
            next: 0,
            queued: 0,
        })
    }

    /// The largest frame a slot holds.
    pub fn max_frame(&self) -> usize {
        self.slot - TX_DATA
    }

    /// Slots in the ring.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Fill the next free slot with `fill` (given the slot's number and
    /// its frame area, returning the frame's length) and mark it for
    /// sending. The area holds what was last written to that slot: the
    /// kernel reads TX frames, it never writes them. False when the ring
    /// is full (the kernel still owns the next slot).
    #[inline]
    pub fn push(&mut self, fill: impl FnOnce(usize, &mut [u8]) -> usize) -> bool {
        let off = self.next * self.slot;
        if self.map.status(off).load(Ordering::Acquire) != libc::TP_STATUS_AVAILABLE {
            return false;
        }
        // SAFETY: the slot is ours (status AVAILABLE) and lies inside the
        // mapping: `off + slot <= slot * slots`.
        let area = unsafe {
            std::slice::from_raw_parts_mut(self.map.ptr.add(off + TX_DATA), self.slot - TX_DATA)
        };
        let len = fill(self.next, area).min(self.slot - TX_DATA);
        // SAFETY: the header is at the start of our slot; tp_len is the
        // second u32 of tpacket2_hdr.
        unsafe {
            let h = self.map.ptr.add(off) as *mut libc::tpacket2_hdr;
            (*h).tp_len = len as u32;
        }
        self.map
            .status(off)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.next = (self.next + 1) % self.slots;
        self.queued += 1;
        true
    }

    /// Hand every marked frame to the kernel, without waiting for the
    /// driver to free them. Frames the kernel refused
    /// (`TP_STATUS_WRONG_FORMAT`) are an error naming the slot.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.queued == 0 {
            return Ok(());
        }
        loop {
            // SAFETY: send() with no buffer: the kernel reads the ring.
            let r =
                unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            if r >= 0 {
                break;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                // The driver's queue was full: what was taken stays taken;
                // the rest goes out on the next flush (still counted as
                // queued, so that flush makes the call again).
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) => return Ok(()),
                _ => return Err(e),
            }
        }
        self.queued = 0;
        let prev = (self.next + self.slots - 1) % self.slots;
        if self.map.status(prev * self.slot).load(Ordering::Acquire) == libc::TP_STATUS_WRONG_FORMAT
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the kernel refused the frame in TX ring slot {prev} (wrong format)"),
            ));
        }
        Ok(())
    }
}

impl TxRing {
    /// Flush until the kernel has sent every marked frame (a full driver
    /// queue leaves some for later), or `timeout` passes; true if all went.
    pub fn drain(&mut self, timeout: std::time::Duration) -> io::Result<bool> {
        let start = std::time::Instant::now();
        loop {
            self.flush()?;
            let pending = (0..self.slots).any(|i| {
                // SENDING: taken, in the driver's hands; only a frame still
                // waiting for the kernel is pending.
                self.map.status(i * self.slot).load(Ordering::Acquire)
                    == libc::TP_STATUS_SEND_REQUEST
            });
            if !pending {
                return Ok(true);
            }
            if start.elapsed() >= timeout {
                return Ok(false);
            }
            // Marked frames the last flush left are flushed again.
            self.queued = self.queued.max(1);
            std::thread::yield_now();
        }
    }
}

/// One received frame, borrowed from a ring block.
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// The frame without its outermost VLAN tag if the kernel took it off
    /// into metadata (`vlan`).
    pub data: &'a [u8],
    /// The frame's length on the wire, the tag included (`data` may be
    /// cut to the snap length).
    pub wire_len: usize,
    /// The outermost tag the kernel took off: TPID and TCI.
    pub vlan: Option<(u16, u16)>,
    /// When the kernel received it, nanoseconds of `CLOCK_REALTIME`.
    pub ts_ns: u64,
}

/// A receive ring on one interface.
#[derive(Debug)]
pub struct RxRing {
    fd: OwnedFd,
    map: Map,
    block: usize,
    blocks: usize,
    next: usize,
}

/// Receive statistics of the socket since the last call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStats {
    pub packets: u64,
    /// Frames the kernel dropped because the ring was full.
    pub drops: u64,
}

impl RxRing {
    /// `blocks` blocks of `block` bytes (a power of two, at least a page),
    /// handed over at the latest `timeout_ms` after their first frame.
    pub fn open(ifname: &str, block: usize, blocks: usize, timeout_ms: u32) -> io::Result<RxRing> {
        let block = block.next_power_of_two().max(4096);
        let frame = 2048usize;
        let req = libc::tpacket_req3 {
            tp_block_size: block as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame as u32,
            tp_frame_nr: (block / frame * blocks) as u32,
            tp_retire_blk_tov: timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        let v3 = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        let (fd, map) = rx_socket(ifname, v3, &req, block * blocks)?;
        Ok(RxRing {
            fd,
            map,
            block,
            blocks,
            next: 0,
        })
    }

    /// Wait up to `timeout_ms` for a block, then call `each` for every
    /// frame of every block the kernel has handed over, and give the
    /// blocks back. Returns the frames seen.
    pub fn poll(
        &mut self,
        timeout_ms: i32,
        mut each: impl FnMut(RxFrame<'_>),
    ) -> io::Result<usize> {
        let (map, block) = (&self.map, self.block);
        let mut next = self.next;
        let r = drain_ready(
            &self.fd,
            timeout_ms,
            &mut next,
            self.blocks,
            |i| map.status(i * block + block_status_offset()),
            |i| Self::walk_block(map, block, i * block, &mut each),
        );
        self.next = next;
        r
    }

    fn walk_block(
        map: &Map,
        block: usize,
        off: usize,
        each: &mut impl FnMut(RxFrame<'_>),
    ) -> usize {
        // SAFETY: the block at `off` was handed to us (TP_STATUS_USER) and
        // lies inside the mapping; the kernel wrote its descriptor.
        let desc = unsafe { &*(map.ptr.add(off) as *const libc::tpacket_block_desc) };
        // SAFETY: bh1 is the only member of the header union for V3.
        let bh = unsafe { desc.hdr.bh1 };
        let n = bh.num_pkts as usize;
        let mut p = bh.offset_to_first_pkt as usize;
        for _ in 0..n {
            if p + size_of::<libc::tpacket3_hdr>() > block {
                break;
            }
            // SAFETY: `p` is inside this block (checked above); the kernel
            // wrote a tpacket3_hdr there.
            let h = unsafe { &*(map.ptr.add(off + p) as *const libc::tpacket3_hdr) };
            let start = p + h.tp_mac as usize;
            let len = h.tp_snaplen as usize;
            if start + len <= block {
                // SAFETY: the frame lies inside this block (checked).
                let data = unsafe { std::slice::from_raw_parts(map.ptr.add(off + start), len) };
                each(rx_frame(
                    data,
                    h.tp_status,
                    h.hv1.tp_vlan_tpid,
                    h.hv1.tp_vlan_tci as u16,
                    h.tp_len,
                    h.tp_sec,
                    h.tp_nsec,
                ));
            }
            if h.tp_next_offset == 0 {
                break;
            }
            p += h.tp_next_offset as usize;
        }
        n
    }

    /// Frames received and dropped by this socket since the last call
    /// (the kernel resets the counters when read).
    pub fn stats(&self) -> io::Result<RxStats> {
        rx_stats(&self.fd)
    }
}

/// A packet socket's frames received and dropped since the last read
/// (`PACKET_STATISTICS`; the kernel resets them when read). The V3 form
/// of the struct begins as the V1/V2 one does.
fn rx_stats(fd: &OwnedFd) -> io::Result<RxStats> {
    // SAFETY: a plain C struct; all-zero is valid.
    let mut s: libc::tpacket_stats_v3 = unsafe { zeroed() };
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `s`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut s as *mut libc::tpacket_stats_v3).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(RxStats {
        packets: s.tp_packets as u64,
        drops: s.tp_drops as u64,
    })
}

/// The geometry of a ring of single frames (`TPACKET_V2`) whose slots
/// hold `need` bytes each: slots a power of two of at least 2 KiB, 16 to
/// a block of at least a page, about `slots` of them but at most
/// `max_bytes` in all and whole blocks. Returns the slot size, the slot
/// count and the request for the kernel.
fn frame_ring(need: usize, slots: usize, max_bytes: usize) -> (usize, usize, libc::tpacket_req) {
    let slot = need.next_power_of_two().max(2048);
    let page = 4096usize;
    let block = slot.max(page) * 16;
    let per_block = block / slot;
    let slots = slots.min(max_bytes / slot).max(per_block);
    let slots = slots.div_ceil(per_block) * per_block;
    let req = libc::tpacket_req {
        tp_block_size: block as u32,
        tp_block_nr: (slots / per_block) as u32,
        tp_frame_size: slot as u32,
        tp_frame_nr: slots as u32,
    };
    (slot, slots, req)
}

/// A receive ring of single frames (`TPACKET_V2`): each frame is handed
/// over as soon as it is written, where a `TPACKET_V3` block waits until
/// it is full or its timeout (1 ms at the least) passes. For a reflector,
/// whose latency is the test's.
#[derive(Debug)]
pub struct FrameRxRing {
    fd: OwnedFd,
    map: Map,
    slot: usize,
    slots: usize,
    next: usize,
}

impl FrameRxRing {
    /// `slots` frames of up to `max_frame` bytes each on `ifname`.
    pub fn open(ifname: &str, max_frame: usize, slots: usize) -> io::Result<FrameRxRing> {
        // The frame starts after the header and the address the kernel
        // writes (TPACKET2_HDRLEN), aligned; a slot is a power of two.
        let (slot, slots, req) =
            frame_ring(libc::TPACKET2_HDRLEN + 16 + max_frame, slots, 64 << 20);
        let v2 = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        let (fd, map) = rx_socket(ifname, v2, &req, slot * slots)?;
        Ok(FrameRxRing {
            fd,
            map,
            slot,
            slots,
            next: 0,
        })
    }

    /// Frames received and dropped (ring full) since the last call.
    pub fn stats(&self) -> io::Result<RxStats> {
        rx_stats(&self.fd)
    }

    /// Wait up to `timeout_ms` for a frame, then call `each` for every
    /// frame the kernel has handed over, giving each slot back. Returns
    /// the frames seen.
    pub fn poll(
        &mut self,
        timeout_ms: i32,
        mut each: impl FnMut(RxFrame<'_>),
    ) -> io::Result<usize> {
        let (map, slot) = (&self.map, self.slot);
        let mut next = self.next;
        let r = drain_ready(
            &self.fd,
            timeout_ms,
            &mut next,
            self.slots,
            |i| map.status(i * slot),
            |i| {
                let off = i * slot;
                // SAFETY: the slot at `off` is ours (TP_STATUS_USER) and
                // lies inside the mapping; the kernel wrote its header.
                let h = unsafe { &*(map.ptr.add(off) as *const libc::tpacket2_hdr) };
                let (start, len) = (h.tp_mac as usize, h.tp_snaplen as usize);
                if start + len <= slot {
                    // SAFETY: the frame lies inside this slot (checked).
                    let data = unsafe { std::slice::from_raw_parts(map.ptr.add(off + start), len) };
                    each(rx_frame(
                        data,
                        h.tp_status,
                        h.tp_vlan_tpid,
                        h.tp_vlan_tci,
                        h.tp_len,
                        h.tp_sec,
                        h.tp_nsec,
                    ));
                }
                1
            },
        );
        self.next = next;
        r
    }
}

/// Offset of `block_status` in a V3 block: after `version` and
/// `offset_to_priv`.
const fn block_status_offset() -> usize {
    8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_frames_start_after_the_aligned_header() {
        // The kernel reads a V2 TX frame at TPACKET2_HDRLEN - sizeof(sockaddr_ll).
        assert_eq!(
            TX_DATA,
            libc::TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>()
        );
        assert_eq!(TX_DATA, 32);
    }

    #[test]
    fn block_status_is_the_first_word_of_the_v3_header() {
        // SAFETY: a plain C struct; all-zero is valid.
        let d: libc::tpacket_block_desc = unsafe { zeroed() };
        let base = &d as *const _ as usize;
        // SAFETY: reading the address of a union field, not its value.
        let st = unsafe { &d.hdr.bh1.block_status as *const u32 as usize };
        assert_eq!(st - base, block_status_offset());
    }

    #[test]
    fn a_missing_interface_is_named() {
        let e = TxRing::open("tl-no-such0", 1500, 64).unwrap_err();
        assert!(e.to_string().contains("tl-no-such0"), "{e}");
    }
}
