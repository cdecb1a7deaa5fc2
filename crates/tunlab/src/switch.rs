//! `tunlab switch --config FILE`: a node started from its file, served
//! until a signal (SIGTERM, SIGINT: stop; SIGHUP: reload the file) or a
//! worker's failure, then stopped with its last statistics printed.

use crate::notify;
use std::path::PathBuf;
use std::process::ExitCode;

static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_signal(_: nix::libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// SIGHUP (`systemctl reload`) came: read the configuration again.
static RELOAD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_hup(_: nix::libc::c_int) {
    RELOAD.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The node's control socket: the file's `control_socket`, or
/// `/run/tunlab/NAME.ctl`.
fn ctl_path(cfg: &tunlab_switch::config::Config) -> PathBuf {
    cfg.control_socket
        .as_ref()
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::default_socket(&cfg.name))
}

/// The node's file, read and checked; the error names the file.
fn read_config(path: &std::path::Path) -> Result<tunlab_switch::config::Config, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    tunlab_switch::config::parse(&text, &path.display().to_string()).map_err(|e| e.to_string())
}

pub(crate) fn run(path: &std::path::Path, keep: bool, cleanup: bool) -> ExitCode {
    use nix::sys::signal::{signal, SigHandler, Signal};
    let cfg = match read_config(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tunlab switch: {e}");
            return ExitCode::FAILURE;
        }
    };
    tunlab_switch::log::set_level(cfg.log_level);
    if cleanup {
        return clean_up(path, &cfg);
    }
    let sw = match tunlab_switch::workers::Switch::start(&cfg) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("tunlab switch: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let handlers: [(Signal, extern "C" fn(nix::libc::c_int)); 3] = [
        (Signal::SIGINT, on_signal),
        (Signal::SIGTERM, on_signal),
        (Signal::SIGHUP, on_hup),
    ];
    for (s, h) in handlers {
        // SAFETY: the handlers only store to an atomic, which is
        // async-signal-safe; nothing else is replaced.
        if let Err(e) = unsafe { signal(s, SigHandler::Handler(h)) } {
            eprintln!("tunlab switch: cannot handle {s}: {e}");
            sw.stop();
            return ExitCode::FAILURE;
        }
    }
    let ctl_path = ctl_path(&cfg);
    let ctl = match tunlab_switch::ctl::CtlServer::bind(&ctl_path, cfg.control_group.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tunlab switch: control socket {}: {e}", ctl_path.display());
            sw.stop();
            return ExitCode::FAILURE;
        }
    };
    let mgmt_path = tunlab_switch::mgmt::path_beside(&ctl_path);
    let mut mgmt = match tunlab_switch::mgmt::MgmtServer::bind(
        &mgmt_path,
        cfg.control_group.as_deref(),
        &cfg.name,
        &cfg.openflow,
        cfg.ssl.as_ref(),
    ) {
        Ok(m) => m,
        Err(e) => {
            eprintln!(
                "tunlab switch: OpenFlow management socket {}: {e}",
                mgmt_path.display()
            );
            sw.stop();
            return ExitCode::FAILURE;
        }
    };
    // The workers' `controller` actions reach the controllers through
    // the management server.
    let tx = mgmt.packet_in_sender();
    let to_controllers = sw.on_all(move |n| n.ofproto.packet_in = Some(tx.clone()));
    if let Err(e) = to_controllers {
        eprintln!("tunlab switch: OpenFlow PACKET_IN queue: {e}");
        sw.stop();
        return ExitCode::FAILURE;
    }
    let mut metrics = match bind_metrics(cfg.metrics) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("tunlab switch: {e}");
            sw.stop();
            return ExitCode::FAILURE;
        }
    };
    let (ports, flows) = sw
        .on(0, |n| {
            (n.netdev.ports().count(), n.ofproto.classifier.len())
        })
        .unwrap_or_default();
    let doors = other_doors(&cfg.openflow, metrics.as_ref());
    tunlab_switch::tl_log!(
        Info,
        "node_running",
        format!(
            "tunlab switch: node '{}' running ({ports} ports, {flows} flows, {} worker{}), control socket {}, OpenFlow punix:{}{doors}",
            sw.name,
            sw.workers(),
            if sw.workers() == 1 { "" } else { "s" },
            ctl_path.display(),
            mgmt.path().display()
        );
        node = sw.name,
        ports = ports,
        flows = flows
    );
    // Every port is open and the datapath loaded or adopted: a
    // `Type=notify` unit is started.
    let status = format!("READY=1\nSTATUS=node {} running, {ports} ports", sw.name);
    if let Err(e) = notify::notify(&status) {
        eprintln!("tunlab switch: cannot tell the service manager it is ready: {e}");
    }
    let keep = keep && cfg.bpf_pin_dir.is_some();
    serve(sw, &ctl, &mut mgmt, metrics.as_mut(), (path, cfg), keep)
}

/// `--cleanup`: the node's kept datapath adopted, then stopped the normal
/// way, which removes its pins, programs and veth ports.
fn clean_up(path: &std::path::Path, cfg: &tunlab_switch::config::Config) -> ExitCode {
    let ctl_path = ctl_path(cfg);
    if std::os::unix::net::UnixStream::connect(&ctl_path).is_ok() {
        eprintln!(
            "tunlab switch --cleanup: node '{}' is running (its control socket {} answers): stop it first",
            cfg.name,
            ctl_path.display()
        );
        return ExitCode::FAILURE;
    }
    match tunlab_switch::workers::Switch::start(cfg) {
        Ok(sw) => {
            sw.stop();
            eprintln!(
                "tunlab switch --cleanup: node '{}': its datapath is removed",
                cfg.name
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tunlab switch --cleanup: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

/// `systemctl reload`: the file read again and what changed applied
/// ([`tunlab_switch::reload`]), the service manager told; a file that
/// does not read changes nothing and says why.
fn reload(
    path: &std::path::Path,
    cfg: &mut tunlab_switch::config::Config,
    sw: &mut tunlab_switch::workers::Switch,
) {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000 + t.tv_nsec() as u64 / 1000)
        .unwrap_or(0);
    let _ = notify::notify(&format!("RELOADING=1\nMONOTONIC_USEC={now}"));
    match read_config(path) {
        Ok(new) => {
            let r = tunlab_switch::reload::apply(cfg, &new, sw);
            tunlab_switch::tl_log!(
                Info,
                "config_reloaded",
                format!("tunlab switch: node '{}' reloaded {}: {}", sw.name, path.display(), r.summary());
                node = sw.name,
                failed = r.failed.len(),
                need_restart = r.need_restart.join(",")
            );
        }
        Err(e) => tunlab_switch::tl_log!(
            Error,
            "config_reload_failed",
            format!("tunlab switch: node '{}' kept its configuration: {e}", sw.name);
            node = sw.name
        ),
    }
    let _ = notify::notify("READY=1");
}

/// The controllers and the metrics endpoint, for the start's log line.
fn other_doors(
    openflow: &[tunlab_switch::config::Target],
    metrics: Option<&tunlab_switch::metrics::MetricsServer>,
) -> String {
    let mut s: String = openflow
        .iter()
        .map(|t| match t {
            tunlab_switch::config::Target::Tcp(_) | tunlab_switch::config::Target::Ssl(_) => {
                format!(", controller {t}")
            }
            _ => format!(", listening {t}"),
        })
        .collect();
    if let Some(a) = metrics.and_then(|m| m.local_addr().ok()) {
        s += &format!(", metrics http://{a}/metrics");
    }
    s
}

/// The metrics endpoint at `addr`, if the configuration names one.
fn bind_metrics(
    addr: Option<std::net::SocketAddr>,
) -> Result<Option<tunlab_switch::metrics::MetricsServer>, String> {
    addr.map(|a| {
        tunlab_switch::metrics::MetricsServer::bind(a).map_err(|e| format!("metrics at {a}: {e}"))
    })
    .transpose()
}

/// Serve the control and management sockets (and the metrics endpoint)
/// on this thread until a signal or a worker's failure; the workers move
/// packets. Then stop the switch, its last statistics printed.
fn serve(
    mut sw: tunlab_switch::workers::Switch,
    ctl: &tunlab_switch::ctl::CtlServer,
    mgmt: &mut tunlab_switch::mgmt::MgmtServer,
    mut metrics: Option<&mut tunlab_switch::metrics::MetricsServer>,
    (path, mut cfg): (&std::path::Path, tunlab_switch::config::Config),
    keep: bool,
) -> ExitCode {
    let mut code = ExitCode::SUCCESS;
    while !STOP.load(std::sync::atomic::Ordering::Relaxed) {
        if RELOAD.swap(false, std::sync::atomic::Ordering::Relaxed) {
            reload(path, &mut cfg, &mut sw);
            mgmt.ports_changed(&mut sw);
        }
        use std::os::fd::AsFd;
        let mut others = vec![ctl.listener().as_fd()];
        others.extend(metrics.as_ref().map(|m| m.listener().as_fd()));
        let ready = mgmt.poll(&others, 100, &mut sw);
        if ready.first() == Some(&true) {
            ctl.serve(&mut sw);
            // add-port and del-port come this way: controllers are told.
            mgmt.ports_changed(&mut sw);
        }
        if let (Some(m), Some(true)) = (metrics.as_deref_mut(), ready.get(1)) {
            m.serve(&sw);
        }
        if let Some(e) = sw.failed() {
            eprintln!("tunlab switch: {e}");
            code = ExitCode::FAILURE;
            break;
        }
    }
    let _ = notify::notify("STOPPING=1");
    // The last word is what `tunlab ctl stats` would have said: as it
    // prints it on a terminal, in one line (one event) for journald.
    if let Ok(stats) = tunlab_switch::ctl::handle("stats", &mut sw) {
        if std::env::var_os("JOURNAL_STREAM").is_some() {
            let one: Vec<&str> = stats.lines().map(str::trim).collect();
            tunlab_switch::tl_log!(
                Info,
                "node_stopped",
                format!("tunlab switch: node '{}' stopping: {}", sw.name, one.join("; "));
                node = sw.name
            );
        } else {
            eprint!("{stats}");
        }
    }
    let kernel = sw.on(0, |n| n.ofproto.dpif.is_some()).unwrap_or(false);
    if keep && kernel && sw.failed().is_none() {
        // As a crash leaves it, but said: the pinned programs and maps go
        // on forwarding the cached flows, and the next start adopts them.
        tunlab_switch::tl_log!(
            Info,
            "datapath_kept",
            format!(
                "tunlab switch: node '{}' stopped; its kernel datapath goes on forwarding the cached flows until the next start adopts it (`tunlab switch --config {} --cleanup` removes it)",
                sw.name,
                path.display()
            );
            node = sw.name
        );
        std::mem::forget(sw);
        return code;
    }
    sw.stop();
    code
}
