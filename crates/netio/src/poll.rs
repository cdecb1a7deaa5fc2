//! A `poll(2)` set that keeps its memory between calls: a packet loop
//! refills it every round (a handful of descriptors) without allocating,
//! and asks which became readable.

use nix::libc;
use std::io;
use std::os::fd::RawFd;

/// Descriptors to wait on for input, and what the last wait found.
#[derive(Debug, Default)]
pub struct Poller {
    fds: Vec<libc::pollfd>,
}

impl Poller {
    pub fn new() -> Poller {
        Poller::default()
    }

    /// Forget the descriptors (the memory stays).
    pub fn clear(&mut self) {
        self.fds.clear();
    }

    /// Wait on `fd` for input; its index is the number added before it.
    pub fn add(&mut self, fd: RawFd) {
        self.fds.push(libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
    }

    pub fn len(&self) -> usize {
        self.fds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }

    /// Wait up to `timeout_ms` (negative: for ever) for one of them to
    /// become readable. A signal ends the wait early with nothing ready.
    pub fn wait(&mut self, timeout_ms: i32) -> io::Result<()> {
        for f in &mut self.fds {
            f.revents = 0;
        }
        // SAFETY: `fds` is a valid array of `len` pollfd structs that lives
        // for the call; the kernel writes only their `revents`. A closed
        // descriptor is reported in `revents` (POLLNVAL), not undefined.
        let r = unsafe {
            libc::poll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                timeout_ms,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
            for f in &mut self.fds {
                f.revents = 0;
            }
        }
        Ok(())
    }

    /// Did the `i`-th descriptor have input at the last wait?
    pub fn readable(&self, i: usize) -> bool {
        self.fds
            .get(i)
            .is_some_and(|f| f.revents & libc::POLLIN != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn reports_which_descriptor_is_readable_and_reuses_its_memory() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let (_c, d) = UnixStream::pair().unwrap();
        let mut p = Poller::new();
        p.add(b.as_raw_fd());
        p.add(d.as_raw_fd());
        p.wait(0).unwrap();
        assert!(!p.readable(0) && !p.readable(1));
        a.write_all(b"x").unwrap();
        p.wait(1000).unwrap();
        assert!(p.readable(0) && !p.readable(1));
        assert!(!p.readable(2), "out of range is not readable");
        let cap = p.fds.capacity();
        p.clear();
        assert!(p.is_empty());
        p.add(d.as_raw_fd());
        p.add(b.as_raw_fd());
        p.wait(0).unwrap();
        assert!(!p.readable(0) && p.readable(1));
        assert_eq!(p.fds.capacity(), cap, "no new allocation");
    }
}
