//! AF_XDP transmit: frames written into a UMEM (memory this process
//! registers with the kernel) and handed to the socket's TX ring by
//! descriptor, in batches; the kernel returns each frame through the
//! completion ring once the device is done with it. Zero-copy where the
//! driver offers it (the device DMAs straight from the UMEM), copy mode
//! otherwise (veth: the kernel builds an skb per frame, as for a packet
//! socket, but without the socket layer or the qdisc). The rings are
//! `xdpilone`'s; this module keeps the frames: which are free, which are
//! in flight, which template each one last held.
//!
//! Same shape as [`crate::TxRing`]: `push` a frame through a closure,
//! `flush` what was pushed, `drain` at the end.

use nix::libc;
use std::collections::VecDeque;
use std::io;
use std::num::NonZeroU32;
use std::ptr::NonNull;
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingTx, Socket, SocketConfig, Umem, UmemConfig};

/// Bind flags of `sockaddr_xdp` (linux/if_xdp.h).
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;

/// How the kernel takes the frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// The driver sends from the UMEM itself.
    ZeroCopy,
    /// The kernel copies each frame into an skb (any device).
    Copy,
}

impl XdpMode {
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::ZeroCopy => "zero-copy",
            XdpMode::Copy => "copy",
        }
    }
}

/// An anonymous, page-aligned mapping, unmapped on drop.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> io::Result<Area> {
        // SAFETY: an anonymous private mapping; no file, no fixed address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p as *mut u8).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Area { ptr, len })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

/// An AF_XDP socket that only sends, on one queue of one interface.
pub struct XdpTx {
    // Field order is drop order: the rings and sockets go before the
    // UMEM's registration, and that before the memory.
    tx: RingTx,
    device: DeviceQueue,
    _sock: Socket,
    _umem: Umem,
    area: Area,
    frame: usize,
    frames: usize,
    /// Frames neither queued nor in the kernel's hands.
    free: VecDeque<u32>,
    /// Pushed, not yet in the TX ring.
    batch: Vec<XdpDesc>,
    /// In the TX ring or the kernel's hands, not yet completed.
    in_flight: usize,
    mode: XdpMode,
}

impl std::fmt::Debug for XdpTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpTx")
            .field("frame", &self.frame)
            .field("frames", &self.frames)
            .field("in_flight", &self.in_flight)
            .field("mode", &self.mode)
            .finish()
    }
}

fn errno(what: &str, e: xdpilone::Errno) -> io::Error {
    let code = e.get_raw();
    let err = io::Error::from_raw_os_error(code);
    let hint = match code {
        libc::EAFNOSUPPORT => " (this kernel has no AF_XDP: CONFIG_XDP_SOCKETS)",
        libc::EPERM => " (AF_XDP needs CAP_NET_RAW and CAP_BPF, or root)",
        libc::ENOMEM | libc::ENOBUFS => " (the UMEM is locked memory: RLIMIT_MEMLOCK)",
        _ => "",
    };
    io::Error::new(err.kind(), format!("{what}: {err}{hint}"))
}

impl XdpTx {
    /// `frames` frames of up to `max_frame` bytes each on `ifname` (in the
    /// calling thread's namespace), queue `queue` (one socket a queue):
    /// zero-copy if the driver takes it, copy mode otherwise.
    pub fn open(ifname: &str, queue: u32, max_frame: usize, frames: usize) -> io::Result<XdpTx> {
        let frame = max_frame.next_power_of_two().clamp(2048, 4096);
        if max_frame > frame {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("AF_XDP frames hold at most {frame} bytes, not {max_frame}"),
            ));
        }
        // Ring sizes are powers of two; every frame fits in the TX ring.
        let frames = frames.clamp(64, 1 << 16).next_power_of_two();
        let area = Area::new(frame * frames)?;
        let name = std::ffi::CString::new(ifname)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name with NUL"))?;
        let mut info = IfInfo::invalid();
        info.from_name(&name)
            .map_err(|e| errno(&format!("interface {ifname}"), e))?;
        info.set_queue(queue);
        // A socket's rings are set once: a refused zero-copy bind starts
        // again with a new UMEM registration and socket (same memory).
        let mut zc_refused = None;
        let mut opened = None;
        for (mode, flag) in [(XdpMode::ZeroCopy, XDP_ZEROCOPY), (XdpMode::Copy, XDP_COPY)] {
            match Self::bind(&area, &info, frame, frames, flag) {
                Ok(parts) => {
                    opened = Some((parts, mode));
                    break;
                }
                Err(e) if mode == XdpMode::ZeroCopy => zc_refused = Some(e),
                Err(e) => {
                    let zc = zc_refused
                        .map(|z| format!("; zero-copy: {z}"))
                        .unwrap_or_default();
                    return Err(io::Error::new(
                        e.kind(),
                        format!("AF_XDP on {ifname} queue {queue}: {e}{zc}"),
                    ));
                }
            }
        }
        let Some(((tx, device, sock, umem), mode)) = opened else {
            return Err(io::Error::other(format!(
                "AF_XDP on {ifname}: no mode bound"
            )));
        };
        Ok(XdpTx {
            tx,
            device,
            _sock: sock,
            _umem: umem,
            area,
            frame,
            frames,
            free: (0..frames as u32).collect(),
            batch: Vec::with_capacity(frames),
            in_flight: 0,
            mode,
        })
    }

    /// A UMEM over `area`, its fill and completion rings, a TX ring, bound
    /// to `info`'s queue with `flag` (zero-copy or copy).
    fn bind(
        area: &Area,
        info: &IfInfo,
        frame: usize,
        frames: usize,
        flag: u16,
    ) -> io::Result<(RingTx, DeviceQueue, Socket, Umem)> {
        let config = UmemConfig {
            fill_size: 64,
            complete_size: frames as u32,
            frame_size: frame as u32,
            headroom: 0,
            flags: 0,
        };
        let region = NonNull::slice_from_raw_parts(area.ptr, area.len);
        // SAFETY: the area is page-aligned (mmap), `frame * frames` long,
        // and outlives the UMEM (field order of `XdpTx`).
        let umem = unsafe { Umem::new(config, region) }.map_err(|e| errno("UMEM", e))?;
        let sock = Socket::with_shared(info, &umem).map_err(|e| errno("socket", e))?;
        let device = umem
            .fq_cq(&sock)
            .map_err(|e| errno("fill and completion rings", e))?;
        let user = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: None,
                    tx_size: NonZeroU32::new(frames as u32),
                    bind_flags: SocketConfig::XDP_BIND_NEED_WAKEUP | flag,
                },
            )
            .map_err(|e| errno("TX ring", e))?;
        let tx = user.map_tx().map_err(|e| errno("TX ring mapping", e))?;
        umem.bind(&user).map_err(|e| errno("bind", e))?;
        Ok((tx, device, sock, umem))
    }

    /// Zero-copy or copy mode.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// The largest frame a UMEM frame holds.
    pub fn max_frame(&self) -> usize {
        self.frame
    }

    /// Frames in the UMEM.
    pub fn slots(&self) -> usize {
        self.frames
    }

    /// Take back the frames the kernel is done with.
    fn reclaim(&mut self) {
        let mut done = self.device.complete(self.in_flight as u32);
        while let Some(addr) = done.read() {
            self.free.push_back((addr / self.frame as u64) as u32);
            self.in_flight -= 1;
        }
        done.release();
    }

    /// Fill a free frame with `fill` (given the frame's number and its
    /// area, which holds what that frame last carried; returning the
    /// frame's length) and mark it for sending. False when every frame
    /// is queued or in flight.
    #[inline]
    pub fn push(&mut self, fill: impl FnOnce(usize, &mut [u8]) -> usize) -> bool {
        if self.free.is_empty() {
            self.reclaim();
        }
        let Some(i) = self.free.pop_front() else {
            return false;
        };
        let off = i as usize * self.frame;
        // SAFETY: frame `i` is free (neither in a ring nor in the
        // kernel's hands) and lies inside the area: i < frames.
        let area =
            unsafe { std::slice::from_raw_parts_mut(self.area.ptr.as_ptr().add(off), self.frame) };
        let len = fill(i as usize, area).min(self.frame);
        self.batch.push(XdpDesc {
            addr: off as u64,
            len: len as u32,
            options: 0,
        });
        true
    }

    /// Put the pushed frames on the TX ring and ask the kernel to send
    /// (copy mode sends in the system call, a budget of frames at a time);
    /// take back the completed ones.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.batch.is_empty() {
            let mut w = self.tx.transmit(self.batch.len() as u32);
            let n = w.insert(self.batch.iter().copied()) as usize;
            w.commit();
            drop(w);
            self.in_flight += n;
            // Every frame fits the ring (it has a slot per frame), so all
            // went; anything else is kept for the next flush.
            self.batch.drain(..n);
        }
        if self.in_flight > 0 && (self.mode == XdpMode::Copy || self.tx.needs_wakeup()) {
            // SAFETY: sendto() with no buffer on the socket's own fd: the
            // kernel reads the TX ring.
            let r = unsafe {
                libc::sendto(
                    self.tx.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // Busy: the device's queue, or the kernel still on
                    // the last batch; the frames stay queued.
                    Some(libc::EAGAIN | libc::ENOBUFS | libc::EBUSY | libc::EINTR) => {}
                    _ => return Err(e),
                }
            }
        }
        self.reclaim();
        Ok(())
    }

    /// Flush until every pushed frame has completed, or `timeout` passes;
    /// true if all went.
    pub fn drain(&mut self, timeout: std::time::Duration) -> io::Result<bool> {
        let start = std::time::Instant::now();
        loop {
            self.flush()?;
            if self.batch.is_empty() && self.in_flight == 0 {
                return Ok(true);
            }
            if start.elapsed() >= timeout {
                return Ok(false);
            }
            std::thread::yield_now();
        }
    }
}
