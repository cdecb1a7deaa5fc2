//! Where the kernel datapath pins its maps and links, so that they outlive
//! the switch however it was started, and a restarted switch adopts them.
//!
//! Pins live on a bpf filesystem, and a mount lives in a mount namespace.
//! `ip netns exec` (how the README starts a switch in a namespace) gives
//! its process a private mount namespace with its own `/sys`: a bpffs
//! mounted there dies with the process, and the pins with it. So the pins
//! go where the host's processes see them: the bpffs of the outermost
//! mount namespace the switch can reach (that of PID 1 on a host), mounted
//! at `/sys/fs/bpf` there if nothing is, as systemd does at boot. Where
//! that cannot be done the switch says so at start, with the fix.
//!
//! Under the base folder, each network namespace has its own
//! (`netns-COOKIE`, by the kernel's cookie, which no later namespace
//! reuses) and each node its own within it: two switches named alike in
//! two namespaces keep apart. The pins of a namespace that no longer
//! exists (a killed switch whose namespace was then deleted) are removed
//! by the next switch that starts. A normal stop removes its node's
//! folder, then the namespace's and the base folder when they are empty:
//! a host where no switch runs keeps no tunlab folder on its bpffs. The
//! folders are made and removed under one lock, so that a stop never
//! removes a folder a starting switch is about to fill.

use crate::port::StartError;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tunlab_netio::netns;

/// The conventional mount point of the bpf filesystem.
const BPFFS: &str = "/sys/fs/bpf";

/// Held while a switch mounts the bpffs or makes or removes the pins'
/// folders.
const LAYOUT_LOCK: &str = "/run/tunlab/bpffs-mount.lock";

/// The lock on a node's pins: held while the descriptor is open, its file
/// removed on a normal stop (a killed switch's stays, unlocked); the
/// namespace's folder goes too once its last node's pins have.
#[derive(Debug)]
pub(super) struct PinLock {
    _file: std::fs::File,
    path: PathBuf,
    /// The node's folder, and its network namespace's.
    node_dir: PathBuf,
    netns_dir: PathBuf,
    /// The base folder, as it can be removed (through its parent when it
    /// is another mount namespace's).
    base_dir: PathBuf,
    /// The pins' base folder and its parent in an outer mount namespace,
    /// which the pins' paths go through (`/proc/self/fd/N/…`).
    _outer: Option<(std::fs::File, std::fs::File)>,
    /// The pins' folder as people find it (`bpf_pin_dir/netns-C/NODE`).
    shown: String,
}

impl PinLock {
    /// Where the pins are, for messages.
    pub(super) fn shown(&self) -> &str {
        &self.shown
    }
}

impl Drop for PinLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        // Folders still in use (another node's, another namespace's) are
        // not empty and stay; a mount point stays too (EBUSY).
        let _layout = lock_file(LAYOUT_LOCK, true);
        let _ = std::fs::remove_dir(&self.node_dir);
        let _ = std::fs::remove_dir(&self.netns_dir);
        let _ = std::fs::remove_dir(&self.base_dir);
    }
}

fn is_bpffs(path: &Path) -> bool {
    use nix::sys::statfs::{statfs, BPF_FS_MAGIC};
    statfs(path).is_ok_and(|s| s.filesystem_type() == BPF_FS_MAGIC)
}

/// The inode of a namespace file (`/proc/PID/ns/mnt`).
fn ns_inode(path: &str) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// The outermost mount namespace this process can reach, as the
/// lowest-numbered process in it that this one may look into (PID 1 on a
/// host; a kernel thread, which lives in the initial namespace, where PID
/// 1 is out of reach; a container's own PID 1 in a container), if it is
/// not this process's own. `ip netns exec` makes a private namespace for
/// the command it runs; the processes that were there before are still in
/// the one it came from.
fn outer_mount_ns() -> Option<u32> {
    let own = ns_inode("/proc/self/ns/mnt")?;
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    let (pid, ino) = pids.into_iter().find_map(|pid| {
        let ino = ns_inode(&format!("/proc/{pid}/ns/mnt"))?;
        // Reachable through /proc/PID/root as well (a ptrace check).
        std::fs::metadata(format!("/proc/{pid}/root/")).ok()?;
        Some((pid, ino))
    })?;
    (ino != own).then_some(pid)
}

/// Where the pins go: `base` on a bpffs that outlives this process, as
/// this process reaches it (a path through a descriptor it keeps open,
/// when the bpffs is another mount namespace's), with what to keep open;
/// or, when no such bpffs can be had, `base` in this process's own view
/// and the warning to print.
struct Base {
    path: PathBuf,
    /// `path` as it can be removed (`rmdir` of a `/proc/self/fd/N` link is
    /// no `rmdir` of the folder): through its parent's descriptor.
    removable: PathBuf,
    /// The folder and its parent in the other mount namespace, kept open
    /// so that paths through them stay good whatever becomes of the
    /// process they were found through.
    held: Option<(std::fs::File, std::fs::File)>,
    warning: Option<String>,
}

fn persistent_base(base: &Path) -> Result<Base, String> {
    let own = |warning| Base {
        path: base.to_path_buf(),
        removable: base.to_path_buf(),
        held: None,
        warning,
    };
    let Some(pid) = outer_mount_ns() else {
        // This process is in the outermost mount namespace it can reach:
        // whatever it mounts stays.
        mount_if_missing(base, None)?;
        return Ok(own(None));
    };
    // A private mount namespace (as under `ip netns exec`). A bpffs
    // mounted before it was made is the outer one's too.
    let root = format!("/proc/{pid}/root");
    let outer_view = Path::new(&root).join(base.strip_prefix("/").unwrap_or(base));
    let same_fs = |a: &Path, b: &Path| match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev(),
        _ => false,
    };
    if is_bpffs(base) && same_fs(base, &outer_view) {
        return Ok(own(None));
    }
    let ns = format!("/proc/{pid}/ns/mnt");
    let open = |p: &Path| std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()));
    let outer = mount_if_missing(base, Some((&ns, &root))).and_then(|()| {
        let parent = outer_view.parent().unwrap_or(&outer_view);
        Ok((open(&outer_view)?, open(parent)?))
    });
    match outer {
        Ok((dir, parent)) => {
            use std::os::fd::AsRawFd;
            let name = base.file_name().unwrap_or_default();
            Ok(Base {
                path: PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())),
                removable: Path::new(&format!("/proc/self/fd/{}", parent.as_raw_fd())).join(name),
                held: Some((dir, parent)),
                warning: None,
            })
        }
        Err(why) => {
            mount_if_missing(base, None)?;
            Ok(own(Some(format!(
                "WARNING: the kernel datapath's pins at {} are in this process's private mount namespace (as under `ip netns exec`) and die with it: if this switch is killed, its tenants' traffic stops until a new one has started and programmed its own datapath ({why}). Fix: mount a bpf filesystem in the host's mount namespace before starting the switch (`mount -t bpf bpf {BPFFS}`) and keep bpf_pin_dir under it",
                base.display()
            ))))
        }
    }
}

/// Mount a bpffs at /sys/fs/bpf when `base` is under it and nothing is
/// mounted there, in this process's mount namespace, or in `outer` (its
/// namespace file, through nsenter, and the root it is seen through).
/// Then make `base`, which must be on a bpffs.
fn mount_if_missing(base: &Path, outer: Option<(&str, &str)>) -> Result<(), String> {
    let view = |p: &Path| match outer {
        Some((_, root)) => Path::new(root).join(p.strip_prefix("/").unwrap_or(p)),
        None => p.to_path_buf(),
    };
    let fs_root = Path::new(BPFFS);
    // Switches starting together would each mount one, stacked: one at a
    // time looks and mounts (the caller holds LAYOUT_LOCK).
    if base.starts_with(fs_root) && !is_bpffs(&view(fs_root)) {
        let mount = ["mount", "-t", "bpf", "bpf", BPFFS];
        let done = match outer {
            Some((ns, _)) => {
                let flag = format!("--mount={ns}");
                let mut args = vec!["nsenter", flag.as_str()];
                args.extend_from_slice(&mount);
                netns::run(&args)
            }
            None => netns::run(&mount),
        };
        done.map_err(|e| {
            format!("no bpf filesystem mounted at {BPFFS}, and mounting one failed: {e}")
        })?;
    }
    std::fs::create_dir_all(view(base)).map_err(|e| e.to_string())?;
    if !is_bpffs(&view(base)) {
        return Err(
            "not on a bpf filesystem (mount -t bpf bpf DIR, or bpf_pin_dir = \"none\")".into(),
        );
    }
    Ok(())
}

/// An exclusive lock on the file at `path` (made if missing), held while
/// the returned file is open; `None` when another process holds it and
/// `wait` is false.
fn lock_file(path: &str, wait: bool) -> Result<Option<std::fs::File>, String> {
    use std::os::fd::AsRawFd;
    std::fs::create_dir_all("/run/tunlab").map_err(|e| format!("/run/tunlab: {e}"))?;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("{path}: {e}"))?;
    let how = if wait {
        nix::libc::LOCK_EX
    } else {
        nix::libc::LOCK_EX | nix::libc::LOCK_NB
    };
    // SAFETY: flock on a descriptor this function owns; no memory passed.
    Ok((unsafe { nix::libc::flock(f.as_raw_fd(), how) } == 0).then_some(f))
}

/// Remove the pins (and lock files) of network namespaces that no longer
/// exist: nothing can reach their devices, which went with them.
fn sweep_dead_namespaces(base: &Path, node_for_messages: &str) {
    let listed = |dir: &Path, cookie_of: fn(&str) -> Option<u64>| -> Vec<(u64, PathBuf)> {
        let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
        entries
            .filter_map(|e| Some((cookie_of(e.file_name().to_str()?)?, e.path())))
            .collect()
    };
    // Listed before the live namespaces are: what is listed belongs to a
    // namespace that was alive then, or is garbage.
    let dirs = listed(base, |n| n.strip_prefix("netns-")?.parse().ok());
    // The pin locks: pins-DEV-COOKIE-NODE.lock.
    let locks = listed(Path::new("/run/tunlab"), |n| {
        let (_, rest) = n.strip_prefix("pins-")?.split_once('-')?;
        rest.split_once('-')?.0.parse().ok()
    });
    if dirs.is_empty() && locks.is_empty() {
        return;
    }
    let live = netns::live_cookies();
    for (_, dir) in dirs.iter().filter(|(c, _)| !live.contains(c)) {
        let nodes = std::fs::read_dir(dir).into_iter().flatten().flatten();
        for node in nodes {
            let files = std::fs::read_dir(node.path())
                .into_iter()
                .flatten()
                .flatten();
            for f in files {
                let _ = std::fs::remove_file(f.path());
            }
            let _ = std::fs::remove_dir(node.path());
        }
        if std::fs::remove_dir(dir).is_ok() {
            crate::tl_log!(
                Info,
                "dead_pins_removed",
                format!("tunlab switch {node_for_messages}: removed {}: the pins of a network namespace that no longer exists", dir.display());
                node = node_for_messages,
                dir = dir.display()
            );
        }
    }
    // A killed switch's lock file, its namespace gone (its pins may have
    // been on a bpffs that is gone too).
    for (_, lock) in locks.iter().filter(|(c, _)| !live.contains(c)) {
        let _ = std::fs::remove_file(lock);
    }
}

/// Where the node pins its kernel datapath (`bpf_pin_dir`/netns-COOKIE/
/// NAME), locked against a second live switch of the same name in the same
/// network namespace.
pub(super) fn pin_dir(
    base: Option<&str>,
    node: &str,
) -> Result<Option<(PathBuf, PinLock)>, StartError> {
    let Some(given) = base else {
        return Ok(None);
    };
    let perr = |msg: String| StartError::Port {
        port: "-".into(),
        msg: format!("bpf_pin_dir {given}: {msg}"),
    };
    // From the mount to the node's own folder, one switch at a time, and
    // no stop removing folders meanwhile.
    let _layout = lock_file(LAYOUT_LOCK, true).map_err(perr)?;
    let Base {
        path: base,
        removable,
        held,
        warning,
    } = persistent_base(Path::new(given)).map_err(perr)?;
    if let Some(w) = warning {
        crate::tl_log!(Warning, "pins_not_persistent", format!("tunlab switch {node}: {w}"); node = node);
    }
    sweep_dead_namespaces(&base, node);
    let cookie =
        netns::cookie().map_err(|e| perr(format!("the network namespace's cookie: {e}")))?;
    let netns_dir = base.join(format!("netns-{cookie}"));
    let dir = netns_dir.join(node);
    std::fs::create_dir_all(&dir).map_err(|e| perr(format!("{}: {e}", dir.display())))?;
    // Named by the bpf filesystem's device (each mount of bpffs is its
    // own instance), the namespace and the node.
    let fs_dev = std::fs::metadata(&base)
        .map(|m| m.dev())
        .map_err(|e| perr(e.to_string()))?;
    let lock_path = format!("/run/tunlab/pins-{fs_dev:x}-{cookie}-{node}.lock");
    let lock = lock_file(&lock_path, false).map_err(perr)?.ok_or_else(|| {
        perr(format!(
            "{given}/netns-{cookie}/{node} belongs to a running switch (node names must differ, or give another bpf_pin_dir)"
        ))
    })?;
    Ok(Some((
        dir.clone(),
        PinLock {
            _file: lock,
            path: lock_path.into(),
            node_dir: dir,
            netns_dir,
            base_dir: removable,
            shown: match &held {
                Some(_) => format!("{given}/netns-{cookie}/{node} (in an outer mount namespace)"),
                None => format!("{given}/netns-{cookie}/{node}"),
            },
            _outer: held,
        },
    )))
}
