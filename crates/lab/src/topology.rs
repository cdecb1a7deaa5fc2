//! The lab's hosts as the variants see them: two hosts joined by an
//! underlay, a tenant behind each (namespaces here, or real hosts), the
//! names of the links made on them, and the way to a node's control
//! socket, here or over SSH.

use crate::host::Host;
use crate::variant::{UNDER, UNDERLAY_MTU};
use crate::LabError;
use std::path::Path;
use std::time::{Duration, Instant};
use tunlab_netio::netns::Veth;

/// Names of the links the lab makes on a host: in a namespace of its own
/// the short ones; on a real host names with the run's tag, so that none
/// can meet the host's own (and `--cleanup` finds them).
#[derive(Debug, Clone)]
pub struct Names {
    pub bridge: String,
    pub vxlan: String,
    /// The host end of the tenant's veth.
    pub ten: String,
    /// tunlab's tenant port (a TAP, or the kernel datapath's veth; the
    /// tenant's interface has the same name).
    pub port: String,
    /// The tenant's macvlan on the underlay (`none` on real hosts).
    pub macvlan: String,
}

/// The lab's hosts: two hosts joined by an underlay, a tenant behind each.
/// Here: four namespaces and a veth underlay. On real hosts: their root
/// namespaces, their NICs, and a tenant namespace made on each.
#[derive(Debug)]
pub struct Topology {
    pub h: [Host; 2],
    pub t: [Host; 2],
    /// The underlay interface on each host and its address.
    pub under: [String; 2],
    pub under_ip: [String; 2],
    pub names: Names,
    /// The real hosts, when the run is on them.
    pub remote: Option<crate::remote::Remote>,
    /// The variant's index in the run: keeps the control sockets of
    /// variants set up side by side apart.
    pub n: usize,
}

impl Topology {
    /// Fresh namespaces and the underlay veth (`under` on both hosts).
    pub fn build(n: usize) -> Result<Topology, LabError> {
        let topo = Topology {
            h: [Host::create("h1", 4 * n)?, Host::create("h2", 4 * n + 1)?],
            t: [
                Host::create("t1", 4 * n + 2)?,
                Host::create("t2", 4 * n + 3)?,
            ],
            under: ["under".into(), "under".into()],
            under_ip: UNDER.map(String::from),
            names: Names {
                bridge: "br0".into(),
                vxlan: "vx0".into(),
                ten: "ten".into(),
                port: "tap0".into(),
                macvlan: "mv0".into(),
            },
            remote: None,
            n,
        };
        let (Some(h1), Some(h2)) = (topo.h[0].netns(), topo.h[1].netns()) else {
            return Err(LabError::Setup(
                "the local topology is made of namespaces".into(),
            ));
        };
        let veth = Veth {
            mtu: Some(u32::from(UNDERLAY_MTU)),
            ..Veth::default()
        };
        h1.veth("under", h2.name(), "under", veth)?;
        Ok(topo)
    }

    /// The two real hosts of `r` and a fresh tenant namespace on each
    /// (`n` keeps names apart between variants).
    pub fn on_hosts(r: &crate::remote::Remote, n: usize) -> Result<Topology, LabError> {
        let tag = &r.tag;
        let h = [
            Host::remote(r.ssh[0].clone(), "h1"),
            Host::remote(r.ssh[1].clone(), "h2"),
        ];
        let t1 = Host::remote_ns(&r.ssh[0], &format!("{tag}-{n}-t1"), "t1")?;
        let t2 = Host::remote_ns(&r.ssh[1], &format!("{tag}-{n}-t2"), "t2")?;
        Ok(Topology {
            h,
            t: [t1, t2],
            under: [
                r.found[0].underlay_dev.clone(),
                r.found[1].underlay_dev.clone(),
            ],
            under_ip: r.underlay.clone(),
            names: Names {
                bridge: format!("{tag}b"),
                vxlan: format!("{tag}v"),
                ten: format!("{tag}t"),
                port: format!("{tag}p"),
                macvlan: format!("{tag}m"),
            },
            remote: Some(r.clone()),
            n,
        })
    }

    /// Where node `i`'s switch serves its control socket (per lab
    /// process, so that concurrent runs do not meet).
    pub fn ctl_path(&self, i: usize) -> String {
        match &self.remote {
            Some(r) => format!("{}/bench{}.ctl", r.workdir, i + 1),
            None => ctl_path(&format!("v{}-bench{}", self.n, i + 1)),
        }
    }

    /// How node `i`'s control socket is reached.
    pub(crate) fn ctl(&self, i: usize) -> Ctl {
        Ctl {
            path: self.ctl_path(i),
            remote: self
                .remote
                .as_ref()
                .map(|r| (r.ssh[i].clone(), r.tunlab[i].clone())),
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // On a real host the links made in its root namespace go (the
        // tenant's veth goes with its namespace); here the namespaces take
        // everything with them.
        if self.remote.is_some() {
            for h in &self.h {
                for l in [
                    &self.names.bridge,
                    &self.names.vxlan,
                    &self.names.ten,
                    &self.names.macvlan,
                ] {
                    let _ = h.run(&[
                        "sh",
                        "-c",
                        &format!("! ip link show {l} >/dev/null 2>&1 || ip link del {l}"),
                    ]);
                }
            }
        }
    }
}

/// A tunlab node's control socket, here or on a real host (reached with
/// `tunlab ctl` over SSH).
#[derive(Debug, Clone)]
pub struct Ctl {
    pub path: String,
    remote: Option<(crate::remote::Ssh, String)>,
}

impl Ctl {
    /// A socket on this machine.
    pub fn local(path: String) -> Ctl {
        Ctl { path, remote: None }
    }

    /// A socket on a real host, reached with its `tunlab ctl`.
    pub fn remote(path: String, ssh: crate::remote::Ssh, tunlab: String) -> Ctl {
        Ctl {
            path,
            remote: Some((ssh, tunlab)),
        }
    }

    /// Send one request: whether the switch took it, and its answer.
    pub fn request(&self, req: &str) -> Result<(bool, String), String> {
        match &self.remote {
            None => tunlab_ctl::request(Path::new(&self.path), req)
                .map_err(|e| format!("{}: {e}", self.path)),
            Some((ssh, tunlab)) => {
                match ssh.run(&[tunlab, "ctl", "--socket", &self.path, req]) {
                    Ok(out) => Ok((true, out)),
                    Err(e @ LabError::Ssh { .. }) => Err(e.to_string()),
                    // `tunlab ctl` exits 1 when the switch refused.
                    Err(e) => Ok((false, e.to_string())),
                }
            }
        }
    }

    fn ready(&self) -> bool {
        match &self.remote {
            None => std::os::unix::net::UnixStream::connect(&self.path).is_ok(),
            Some(_) => matches!(self.request("show"), Ok((true, _))),
        }
    }
}

/// Where a lab node's switch serves its control socket (per lab process,
/// so that concurrent runs do not meet).
pub(crate) fn ctl_path(name: &str) -> String {
    format!("/run/tunlab/lab-{}-{name}.ctl", std::process::id())
}

/// Wait until a switch accepts on its control socket; a switch that exits
/// first is reported with the end of its error output.
pub(crate) fn wait_for_ctl(
    ctl: &Ctl,
    timeout: Duration,
    mut exited: impl FnMut() -> Option<String>,
) -> Result<(), LabError> {
    let end = Instant::now() + timeout;
    let path = &ctl.path;
    loop {
        if ctl.ready() {
            return Ok(());
        }
        if let Some(why) = exited() {
            return Err(LabError::Setup(why));
        }
        if Instant::now() >= end {
            return Err(LabError::Setup(format!(
                "the switch did not serve its control socket {path} within {timeout:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
