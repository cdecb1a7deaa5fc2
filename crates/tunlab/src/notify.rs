//! systemd's readiness protocol (`sd_notify`), for `Type=notify` units:
//! a datagram to the socket `$NOTIFY_SOCKET` names (a path, or an
//! abstract name after `@`). Without that variable, or with it empty
//! (not started by systemd), nothing is sent.

use std::os::unix::net::UnixDatagram;

/// Send `state` (`READY=1`, `STOPPING=1`, `STATUS=...`, one per line) to
/// the service manager; whether it was sent (false without one).
pub fn notify(state: &str) -> std::io::Result<bool> {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET").filter(|t| !t.is_empty()) else {
        return Ok(false);
    };
    let target = target.to_string_lossy().into_owned();
    let sock = UnixDatagram::unbound()?;
    match target.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(state.as_bytes(), &addr)?;
        }
        None => {
            sock.send_to(state.as_bytes(), &target)?;
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_reaches_the_socket_named_by_notify_socket() -> std::io::Result<()> {
        let dir = std::env::temp_dir().join(format!("tunlab-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("notify");
        let listener = UnixDatagram::bind(&path)?;
        // The only test of this binary that sets NOTIFY_SOCKET.
        std::env::set_var("NOTIFY_SOCKET", &path);
        assert!(notify("READY=1\nSTATUS=up")?);
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf)?;
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=up");
        std::env::remove_var("NOTIFY_SOCKET");
        assert!(!notify("READY=1")?);
        std::env::set_var("NOTIFY_SOCKET", "");
        assert!(!notify("READY=1")?);
        std::env::remove_var("NOTIFY_SOCKET");
        std::fs::remove_dir_all(&dir)
    }
}
