//! Batched reads and deletes of the flow cache (`BPF_MAP_*_BATCH`,
//! which aya does not wrap).

use super::*;

/// Entries a batched read asks for at once.
pub const BATCH: usize = 4096;

/// `union bpf_attr`'s part for the `BPF_MAP_*_BATCH` commands.
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// Batched access to the flow cache, with its buffers.
pub struct FlowBatch {
    fd: std::os::fd::OwnedFd,
    keys: Vec<CKey>,
    values: Vec<Flow>,
    /// Entries read since this handle was made (0: batches never worked).
    pub(super) walked: u64,
}

impl std::fmt::Debug for FlowBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowBatch")
            .field("walked", &self.walked)
            .finish_non_exhaustive()
    }
}

impl FlowBatch {
    pub(super) fn new(fd: std::os::fd::OwnedFd) -> FlowBatch {
        FlowBatch {
            fd,
            keys: vec![CKey::default(); BATCH],
            values: vec![Flow::default(); BATCH],
            walked: 0,
        }
    }

    fn call(&self, cmd: libc::c_long, attr: &mut BatchAttr) -> std::io::Result<()> {
        // SAFETY: `attr` is a valid bpf_attr prefix for the batch commands
        // whose keys/values pointers name buffers of `count` entries
        // (a CKey and a Flow each, the map's key and value sizes), alive for
        // the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                attr as *mut BatchAttr,
                std::mem::size_of::<BatchAttr>(),
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Read every entry, [`BATCH`] a call, ask `doomed` of each (its key
    /// and value), and delete the doomed ones of each batch
    /// before reading the next: the walk's position is a bucket, which
    /// deleting entries already read does not move, and memory stays one
    /// batch.
    pub fn sweep(&mut self, doomed: &mut impl FnMut(&CKey, &Flow) -> bool) -> std::io::Result<()> {
        self.sweep_at_most(u64::MAX, doomed).map(|_| ())
    }

    /// [`FlowBatch::sweep`], stopping after the batch in which `max`
    /// entries have been read: true if it read them all.
    pub fn sweep_at_most(
        &mut self,
        max: u64,
        doomed: &mut impl FnMut(&CKey, &Flow) -> bool,
    ) -> std::io::Result<bool> {
        use std::os::fd::AsRawFd;
        const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
        // The position between calls: a bucket number for hash maps.
        let mut token = [0u64; 2];
        let mut first = true;
        let mut gone = Vec::with_capacity(BATCH);
        let mut read = 0u64;
        loop {
            let mut attr = BatchAttr {
                in_batch: if first { 0 } else { token.as_ptr() as u64 },
                out_batch: token.as_mut_ptr() as u64,
                keys: self.keys.as_mut_ptr() as u64,
                values: self.values.as_mut_ptr() as u64,
                count: BATCH as u32,
                map_fd: self.fd.as_raw_fd() as u32,
                ..BatchAttr::default()
            };
            let r = self.call(BPF_MAP_LOOKUP_BATCH, &mut attr);
            let end = match r {
                Ok(()) => false,
                // The last entries come with ENOENT.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => true,
                Err(e) => return Err(e),
            };
            let n = (attr.count as usize).min(BATCH);
            gone.clear();
            for i in 0..n {
                if doomed(&self.keys[i], &self.values[i]) {
                    gone.push(self.keys[i]);
                }
            }
            self.delete(&gone);
            self.walked += n as u64;
            read += n as u64;
            if end {
                return Ok(true);
            }
            if read >= max {
                return Ok(false);
            }
            first = false;
        }
    }

    /// Delete `keys` in batches (one by one if the kernel refuses
    /// batched deletes); a key the LRU took meanwhile is skipped.
    fn delete(&self, keys: &[CKey]) {
        use std::os::fd::AsRawFd;
        const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
        const BPF_MAP_DELETE_BATCH: libc::c_long = 27;
        let mut done = 0;
        while done < keys.len() {
            let chunk = &keys[done..(done + BATCH).min(keys.len())];
            let mut attr = BatchAttr {
                keys: chunk.as_ptr() as u64,
                count: chunk.len() as u32,
                map_fd: self.fd.as_raw_fd() as u32,
                ..BatchAttr::default()
            };
            let r = self.call(BPF_MAP_DELETE_BATCH, &mut attr);
            // `count` says how many went, also when it stopped early.
            done += (attr.count as usize).min(chunk.len());
            match r {
                Ok(()) => {}
                // It stops at a key the LRU took meanwhile: skip that one.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => done += 1,
                Err(_) => break,
            }
        }
        for k in &keys[done.min(keys.len())..] {
            let attr = ElemAttr {
                map_fd: self.fd.as_raw_fd() as u32,
                key: k as *const CKey as u64,
                ..ElemAttr::default()
            };
            // SAFETY: `attr` is the bpf_attr prefix of BPF_MAP_DELETE_ELEM,
            // its key pointer names a live CKey of the map's key size.
            unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    BPF_MAP_DELETE_ELEM,
                    &attr as *const ElemAttr,
                    std::mem::size_of::<ElemAttr>(),
                );
            }
        }
    }
}

/// `union bpf_attr`'s part for the element commands.
#[repr(C)]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}
