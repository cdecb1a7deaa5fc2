//! TAP devices: tenant ports. Opened with `IFF_VNET_HDR` so that every
//! frame carries a virtio-net header, and with `TUNSETOFFLOAD` so that the
//! kernel may hand over checksum-partial TCP super-frames of up to 64 KB
//! instead of 1500-byte packets (the tenant side of the speed story).
//!
//! The ioctl plumbing is kept here, apart from the datapath; every `unsafe`
//! block says why it is sound.

use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const IFNAMSIZ: usize = 16;
const IFF_TAP: i16 = 0x0002;
const IFF_NO_PI: i16 = 0x1000;
const IFF_MULTI_QUEUE: i16 = 0x0100;
const IFF_VNET_HDR: i16 = 0x4000;

/// `TUNSETOFFLOAD` flags (linux/if_tun.h).
pub mod offload {
    pub const CSUM: u32 = 0x01;
    pub const TSO4: u32 = 0x02;
    pub const TSO6: u32 = 0x04;
    pub const TSO_ECN: u32 = 0x08;
    pub const USO4: u32 = 0x20;
    pub const USO6: u32 = 0x40;
}

#[repr(C)]
struct IfReq {
    name: [u8; IFNAMSIZ],
    flags: i16,
    _pad: [u8; 22],
}

nix::ioctl_write_ptr_bad!(tunsetiff, 0x4004_54ca, IfReq);
nix::ioctl_write_int_bad!(tunsetoffload, 0x4004_54d0);
nix::ioctl_write_ptr_bad!(tunsetvnethdrsz, 0x4004_54d8, i32);

/// Why a TAP could not be opened or configured; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    #[error("tap name '{0}' is longer than 15 bytes")]
    NameTooLong(String),
    #[error("cannot open /dev/net/tun ({0}): is the tun module loaded, and are you root?")]
    OpenTun(nix::Error),
    #[error(
        "cannot create tap '{name}' ({err}): a device of that name may exist with other flags"
    )]
    Create { name: String, err: nix::Error },
    #[error("tap '{name}': {what} failed ({err})")]
    Configure {
        name: String,
        what: &'static str,
        err: nix::Error,
    },
}

/// How to open a TAP.
#[derive(Debug, Clone, Copy)]
pub struct TapOptions {
    /// Prefix frames with a 12-byte virtio-net header.
    pub vnet_hdr: bool,
    /// Open as one queue of a multi-queue device (one per thread).
    pub multi_queue: bool,
    /// `TUNSETOFFLOAD` flags (with `vnet_hdr` only).
    pub offload: u32,
}

impl Default for TapOptions {
    fn default() -> TapOptions {
        TapOptions {
            vnet_hdr: true,
            multi_queue: false,
            offload: offload::CSUM | offload::TSO4 | offload::TSO6,
        }
    }
}

/// One queue of a TAP device.
#[derive(Debug)]
pub struct Tap {
    fd: OwnedFd,
    name: String,
    vnet_hdr: bool,
}

/// The virtio-net header length tunlab asks for (virtio 1.x, with
/// num_buffers).
pub const VNET_HDR_LEN: usize = 12;

impl Tap {
    /// Create (or attach to) the TAP `name`, non-blocking.
    pub fn open(name: &str, opts: TapOptions) -> Result<Tap, TapError> {
        if name.len() >= IFNAMSIZ {
            return Err(TapError::NameTooLong(name.to_string()));
        }
        let fd = open(
            "/dev/net/tun",
            OFlag::O_RDWR | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(TapError::OpenTun)?;
        // SAFETY: `open` returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut req = IfReq {
            name: [0; IFNAMSIZ],
            flags: IFF_TAP | IFF_NO_PI,
            _pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        if opts.vnet_hdr {
            req.flags |= IFF_VNET_HDR;
        }
        if opts.multi_queue {
            req.flags |= IFF_MULTI_QUEUE;
        }
        // SAFETY: TUNSETIFF reads a `struct ifreq`; `IfReq` has its layout
        // (16-byte name, then the flags union padded to 40 bytes in all) and
        // lives for the whole call.
        unsafe { tunsetiff(fd.as_raw_fd(), &req) }.map_err(|err| TapError::Create {
            name: name.to_string(),
            err,
        })?;
        let cfg = |what, err| TapError::Configure {
            name: name.to_string(),
            what,
            err,
        };
        if opts.vnet_hdr {
            let len = VNET_HDR_LEN as i32;
            // SAFETY: TUNSETVNETHDRSZ reads one int from the pointer, which
            // points at `len` for the duration of the call.
            unsafe { tunsetvnethdrsz(fd.as_raw_fd(), &len) }
                .map_err(|e| cfg("TUNSETVNETHDRSZ", e))?;
            // SAFETY: TUNSETOFFLOAD takes its flags by value; no memory is
            // shared with the kernel.
            unsafe { tunsetoffload(fd.as_raw_fd(), opts.offload as i32) }
                .map_err(|e| cfg("TUNSETOFFLOAD", e))?;
        }
        Ok(Tap {
            fd,
            name: name.to_string(),
            vnet_hdr: opts.vnet_hdr,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Frames carry a virtio-net header of [`VNET_HDR_LEN`] bytes first.
    pub fn vnet_hdr(&self) -> bool {
        self.vnet_hdr
    }

    /// Read one frame (with its virtio-net header if enabled). `Ok(None)`
    /// when nothing is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match nix::unistd::read(self.fd.as_raw_fd(), buf) {
            Ok(n) => Ok(Some(n)),
            Err(nix::Error::EAGAIN) => Ok(None),
            Err(nix::Error::EINTR) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Write one frame (with its virtio-net header if enabled).
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        loop {
            match nix::unistd::write(self.fd.as_fd(), frame) {
                Err(nix::Error::EINTR) => continue,
                r => return r.map_err(Into::into),
            }
        }
    }
}

impl AsFd for Tap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
