//! BPF_PROG_TEST_RUN: run a loaded program on bytes and read back its
//! verdict and the bytes it left, with no device involved.

use std::os::fd::{AsRawFd, BorrowedFd};

/// `union bpf_attr`'s `test` member (include/uapi/linux/bpf.h).
#[repr(C)]
#[derive(Default)]
struct TestAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

const BPF_PROG_TEST_RUN: libc::c_long = 10;
/// `struct __sk_buff` is 192 bytes; `ifindex` is at offset 40.
const SKB_CTX_LEN: usize = 192;
const SKB_IFINDEX_AT: usize = 40;

/// What a run returned: the TC verdict and the packet afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: u32,
    pub packet: Vec<u8>,
}

/// TC verdicts.
pub const TC_ACT_OK: u32 = 0;
pub const TC_ACT_SHOT: u32 = 2;
pub const TC_ACT_REDIRECT: u32 = 7;

/// Run a TC program on `packet` as if it arrived on device `ifindex`
/// (0: the loopback device).
pub fn run_tc(prog: BorrowedFd<'_>, packet: &[u8], ifindex: u32) -> std::io::Result<Outcome> {
    time_tc(prog, packet, ifindex, 1).map(|(_, o)| o)
}

/// Run a TC program `repeat` times on `packet` (as [`run_tc`]): the
/// kernel's mean time per run in nanoseconds, and the last run's outcome.
/// A program that changes the packet sees its own change on the next run:
/// time the paths that leave it alone (a drop, a redirect as it is).
pub fn time_tc(
    prog: BorrowedFd<'_>,
    packet: &[u8],
    ifindex: u32,
    repeat: u32,
) -> std::io::Result<(u32, Outcome)> {
    let mut ctx = [0u8; SKB_CTX_LEN];
    ctx[SKB_IFINDEX_AT..SKB_IFINDEX_AT + 4].copy_from_slice(&ifindex.to_ne_bytes());
    run(prog, packet, (ifindex != 0).then_some(&ctx[..]), repeat)
}

/// XDP verdicts.
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;

/// Run an XDP program on `packet` (on the loopback device); its verdict.
pub fn run_xdp(prog: BorrowedFd<'_>, packet: &[u8]) -> std::io::Result<u32> {
    run(prog, packet, None, 1).map(|(_, o)| o.verdict)
}

/// Run `prog` `repeat` times on `packet` with context `ctx` (the kernel's
/// default if none): the mean ns per run and the last run's outcome.
fn run(
    prog: BorrowedFd<'_>,
    packet: &[u8],
    ctx: Option<&[u8]>,
    repeat: u32,
) -> std::io::Result<(u32, Outcome)> {
    let mut out = vec![0u8; packet.len() + 512];
    let mut attr = TestAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: packet.len() as u32,
        data_size_out: out.len() as u32,
        data_in: packet.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat: repeat.max(1),
        ..TestAttr::default()
    };
    if let Some(ctx) = ctx {
        attr.ctx_size_in = ctx.len() as u32;
        attr.ctx_in = ctx.as_ptr() as u64;
    }
    test_run(&mut attr)?;
    out.truncate(attr.data_size_out as usize);
    Ok((
        attr.duration,
        Outcome {
            verdict: attr.retval,
            packet: out,
        },
    ))
}

/// The BPF_PROG_TEST_RUN call itself. The caller's `attr` points at
/// buffers that live across the call, with their sizes; the kernel writes
/// at most `data_size_out` bytes to `data_out`.
fn test_run(attr: &mut TestAttr) -> std::io::Result<()> {
    // SAFETY: `attr` is a bpf_attr test member whose pointers the caller
    // keeps valid for the call (see above).
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            attr as *mut TestAttr,
            std::mem::size_of::<TestAttr>(),
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
