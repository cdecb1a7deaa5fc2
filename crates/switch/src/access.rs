//! Who may talk to a node: its unix sockets (the control socket, the
//! OpenFlow management socket) are made mode 0600, or 0660 and owned by
//! the control group, and each client's credentials are checked again on
//! accept.

use nix::unistd::Gid;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

/// A node's unix socket at `path` (the control socket, the OpenFlow
/// management socket): mode 0600, or 0660 and owned by `group` when one
/// is named; non-blocking. A stale socket file (nobody answers) is
/// replaced; a live one is an error.
pub(crate) fn bind_socket(
    path: &Path,
    group: Option<&str>,
) -> std::io::Result<(UnixListener, Option<Gid>)> {
    let group = match group {
        None => None,
        Some(name) => Some(
            nix::unistd::Group::from_name(name)
                .map_err(std::io::Error::from)?
                .ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("control_group '{name}' is not a group on this system"),
                    )
                })?
                .gid,
        ),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if UnixStream::connect(path).is_ok() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            "another tunlab switch is listening there (give this node another name or control_socket)",
        ));
    }
    // Nobody answers: a stale socket from a killed run.
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    let mode = match group {
        Some(g) => {
            nix::unistd::chown(path, None, Some(g)).map_err(std::io::Error::from)?;
            0o660
        }
        None => 0o600,
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    listener.set_nonblocking(true)?;
    Ok((listener, group))
}

/// Whether the peer of `stream` may give orders: root, the switch's own
/// user, or (with a control group) a member of it. The file mode already
/// keeps others out; this holds even if someone loosens it.
pub(crate) fn check_peer(stream: &UnixStream, group: Option<Gid>) -> Result<(), String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred = getsockopt(stream, PeerCredentials)
        .map_err(|e| format!("cannot read the client's credentials: {e}"))?;
    let uid = cred.uid();
    if uid == 0 || uid == nix::unistd::geteuid().as_raw() {
        return Ok(());
    }
    if let Some(g) = group {
        if cred.gid() == g.as_raw() || supplementary_groups(cred.pid()).contains(&g.as_raw()) {
            return Ok(());
        }
    }
    Err(match group {
        Some(g) => format!(
            "permission denied: uid {uid} (gid {}) is neither root nor in the control group (gid {g})",
            cred.gid()
        ),
        None => format!("permission denied: uid {uid} is not root (set control_group to let a group in)"),
    })
}

/// A process's supplementary groups, from /proc (empty if it is gone).
fn supplementary_groups(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("Groups:")).map(|g| {
                g.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}
