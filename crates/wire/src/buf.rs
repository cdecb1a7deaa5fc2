//! A packet buffer with headroom, so that pushing an outer header never moves
//! the payload.

use crate::error::{Error, ErrorKind, Layer, Result};

/// A packet inside a larger buffer: `buf[head..tail]` is the packet, the bytes
/// before `head` are headroom for headers yet to be pushed.
///
/// The storage is borrowed or owned (`B: AsRef<[u8]> + AsMut<[u8]>`), so a
/// datapath can keep a pool of preallocated buffers and reuse them.
#[derive(Debug, Clone)]
pub struct PacketBuf<B> {
    buf: B,
    head: usize,
    tail: usize,
}

impl<B: AsRef<[u8]>> PacketBuf<B> {
    /// An empty packet starting `headroom` bytes into `buf`.
    #[inline]
    pub fn new(buf: B, headroom: usize) -> PacketBuf<B> {
        let cap = buf.as_ref().len();
        let head = headroom.min(cap);
        PacketBuf {
            buf,
            head,
            tail: head,
        }
    }

    /// The packet occupying `buf[head..tail]`; `None` if out of range.
    #[inline]
    pub fn with_range(buf: B, head: usize, tail: usize) -> Option<PacketBuf<B>> {
        if head <= tail && tail <= buf.as_ref().len() {
            Some(PacketBuf { buf, head, tail })
        } else {
            None
        }
    }

    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf.as_ref()[self.head..self.tail]
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.tail - self.head
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tail == self.head
    }

    #[inline]
    pub fn headroom(&self) -> usize {
        self.head
    }

    #[inline]
    pub fn tailroom(&self) -> usize {
        self.buf.as_ref().len() - self.tail
    }

    /// Where the packet starts inside the storage.
    #[inline]
    pub fn head(&self) -> usize {
        self.head
    }

    #[inline]
    pub fn into_inner(self) -> B {
        self.buf
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> PacketBuf<B> {
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.head, self.tail);
        &mut self.buf.as_mut()[h..t]
    }

    /// Grow the packet by `n` bytes at the front and return the whole packet.
    #[inline]
    pub fn push(&mut self, n: usize) -> Result<&mut [u8]> {
        if n > self.head {
            return Err(Error::new(
                Layer::Buffer,
                0,
                ErrorKind::NoRoom {
                    field: "headroom",
                    needed: n,
                    available: self.head,
                },
            ));
        }
        self.head -= n;
        Ok(self.data_mut())
    }

    /// Drop `n` bytes from the front.
    #[inline]
    pub fn pull(&mut self, n: usize) -> Result<()> {
        if n > self.len() {
            return Err(Error::truncated(Layer::Buffer, "pull", 0, n, self.len()));
        }
        self.head += n;
        Ok(())
    }

    /// Append `data` at the end.
    #[inline]
    pub fn extend(&mut self, data: &[u8]) -> Result<()> {
        if data.len() > self.tailroom() {
            return Err(Error::new(
                Layer::Buffer,
                self.len(),
                ErrorKind::NoRoom {
                    field: "tailroom",
                    needed: data.len(),
                    available: self.tailroom(),
                },
            ));
        }
        let t = self.tail;
        self.buf.as_mut()[t..t + data.len()].copy_from_slice(data);
        self.tail += data.len();
        Ok(())
    }

    /// Cut the packet to `len` bytes (no-op if already shorter).
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.tail = self.head + len;
        }
    }

    /// Reset to an empty packet with `headroom` bytes before it.
    #[inline]
    pub fn reset(&mut self, headroom: usize) {
        let cap = self.buf.as_ref().len();
        self.head = headroom.min(cap);
        self.tail = self.head;
    }

    /// Insert `n` bytes after the first `keep` bytes of the packet by moving
    /// those `keep` bytes into the headroom: used for VLAN tags, which go
    /// after the MAC addresses. Only `keep` bytes move, never the payload.
    /// Returns the packet; the `n` new bytes are at `keep..keep + n`.
    #[inline]
    pub fn insert_after(&mut self, keep: usize, n: usize) -> Result<&mut [u8]> {
        if keep > self.len() {
            return Err(Error::truncated(
                Layer::Buffer,
                "insert",
                0,
                keep,
                self.len(),
            ));
        }
        self.push(n)?;
        let d = self.data_mut();
        d.copy_within(n..n + keep, 0);
        Ok(d)
    }

    /// Remove `n` bytes after the first `keep` bytes by moving those `keep`
    /// bytes forward: the inverse of [`PacketBuf::insert_after`].
    #[inline]
    pub fn remove_after(&mut self, keep: usize, n: usize) -> Result<()> {
        if keep + n > self.len() {
            return Err(Error::truncated(
                Layer::Buffer,
                "remove",
                0,
                keep + n,
                self.len(),
            ));
        }
        let d = self.data_mut();
        d.copy_within(0..keep, n);
        self.head += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_pull_keep_payload_in_place() {
        let mut p = PacketBuf::new([0u8; 64], 32);
        p.extend(b"payload").unwrap();
        let before = p.head();
        p.push(4).unwrap().copy_from_slice(b"HDR!payload");
        assert_eq!(p.data(), b"HDR!payload");
        assert_eq!(p.head(), before - 4);
        p.pull(4).unwrap();
        assert_eq!(p.data(), b"payload");
        assert!(p.push(40).is_err());
        assert!(p.pull(8).is_err());
    }

    #[test]
    fn insert_and_remove_after() {
        let mut p = PacketBuf::new([0u8; 32], 8);
        p.extend(b"AABBpay").unwrap();
        let d = p.insert_after(4, 2).unwrap();
        d[4..6].copy_from_slice(b"tt");
        assert_eq!(p.data(), b"AABBttpay");
        p.remove_after(4, 2).unwrap();
        assert_eq!(p.data(), b"AABBpay");
        assert!(p.remove_after(6, 2).is_err());
    }

    #[test]
    fn extend_respects_tailroom() {
        let mut p = PacketBuf::new([0u8; 8], 4);
        assert!(p.extend(b"12345").is_err());
        p.extend(b"1234").unwrap();
        assert_eq!(p.tailroom(), 0);
    }
}
