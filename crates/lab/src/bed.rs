//! The test bed: the run's variants set up side by side, each on a
//! topology of its own (four namespaces here; an idle variant costs
//! nothing), so that the rounds can move from one to the next without a
//! set-up in between. On real hosts the variants would meet on the
//! hosts' own ports (every tunnel on the same UDP port of the same NIC),
//! so there the bed holds one variant at a time.

use crate::guard::Guard;
use crate::host::Host;
use crate::plan::Plan;
use crate::remote::Remote;
use crate::results::VariantResult;
use crate::running::Running;
use crate::topology::Topology;
use crate::traffic::Peers;
use crate::variant::Variant;
use crate::LabError;
use std::path::Path;

/// One variant, up: its datapath and its hosts. The datapath goes first
/// (fields drop in order), then the namespaces.
#[derive(Debug)]
pub struct Station {
    pub running: Running,
    pub topo: Topology,
    /// The `tunlab` executable on the client tenant's host and on the
    /// server tenant's (`tunlab rr`).
    pub tunlab: [String; 2],
}

impl Station {
    /// The tenants a test runs between.
    pub fn peers(&self, cpus: Option<[u16; 2]>) -> Peers<'_> {
        Peers {
            client: &self.topo.t[0],
            server: &self.topo.t[1],
            server_ip: crate::variant::TENANT[1],
            server_if: &self.running.tenant_if,
            cpus,
            tunlab: [&self.tunlab[0], &self.tunlab[1]],
        }
    }
}

/// The variants of a run that are up, by their index in the plan.
#[derive(Debug, Default)]
pub struct Bed {
    pub stations: Vec<(usize, Station)>,
}

impl Bed {
    pub fn get(&self, v: usize) -> Option<&Station> {
        self.stations.iter().find(|(i, _)| *i == v).map(|(_, s)| s)
    }

    /// The plan indices of the variants that are up.
    pub fn up(&self) -> Vec<usize> {
        self.stations.iter().map(|(i, _)| *i).collect()
    }
}

/// What setting the bed up needs besides the plan.
#[derive(Debug)]
pub struct Site<'a> {
    pub tunlab: &'a Path,
    pub dir: &'a Path,
    pub remote: Option<&'a Remote>,
}

/// Set the variants `which` (plan indices) up, each on its own topology.
/// Each gets its entry in `results` (ok, skipped with what is missing, or
/// failed with the set-up's error); the namespaces made are the guard's.
/// `Err` only when the run cannot go on (a real host lost, or a local
/// topology that cannot be built).
pub fn set_up(
    plan: &Plan,
    which: &[usize],
    site: &Site<'_>,
    guard: &mut Guard,
    results: &mut [VariantResult],
    mut progress: impl FnMut(&str),
) -> Result<Bed, LabError> {
    let mut bed = Bed::default();
    for &n in which {
        let v = plan.variants[n];
        let vr = &mut results[n];
        let missing = match site.remote {
            Some(r) => missing_remote(v, r),
            None => v.missing(),
        };
        if let Some(m) = missing {
            vr.status = "skipped".into();
            vr.reason = Some(m);
            continue;
        }
        progress(&format!("{}: setting up", v.name()));
        let topo = match site.remote {
            Some(r) => Topology::on_hosts(r, n),
            None => Topology::build(n),
        };
        let topo = match topo {
            Ok(t) => t,
            Err(e) if site.remote.is_some() => {
                vr.status = "failed".into();
                vr.reason = Some(format!("set-up: {e}"));
                if site.remote.is_some_and(|r| r.lost().is_some()) {
                    return Err(e);
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let running =
            crate::running::setup(v, &topo, site.tunlab, site.dir, plan.workers, plan.spin_us);
        match running {
            Ok(running) => {
                vr.notes = running.notes.clone();
                vr.offloads = every_offload(&topo);
                for h in topo.h.iter().chain(&topo.t) {
                    guard.add_netns(h.name());
                }
                let tunlab = match site.remote {
                    Some(r) => r.tunlab.clone(),
                    None => [0, 1].map(|_| site.tunlab.display().to_string()),
                };
                bed.stations.push((
                    n,
                    Station {
                        running,
                        topo,
                        tunlab,
                    },
                ));
            }
            Err(e) => {
                vr.status = "failed".into();
                vr.reason = Some(format!("set-up: {e}"));
                if site.remote.is_some_and(|r| r.lost().is_some()) {
                    return Err(e);
                }
            }
        }
    }
    Ok(bed)
}

/// A fresh entry for variant `v`, before it is set up.
pub fn entry(v: Variant) -> VariantResult {
    VariantResult {
        variant: v.name().into(),
        status: "ok".into(),
        reason: None,
        tenant_mtu: v.tenant_mtu(),
        notes: Vec::new(),
        offloads: Vec::new(),
        tests: Vec::new(),
    }
}

fn offloads(h: &Host, dev: &str) -> String {
    h.run(&["ethtool", "-k", dev])
        .map(|s| {
            s.lines()
                .filter(|l| l.contains(": on"))
                .map(|l| l.split(':').next().unwrap_or("").trim().to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_else(|e| format!("ethtool failed: {e}"))
}

/// `ethtool -k` of every interface of the four namespaces (underlay
/// veths, tenant veths or TAPs, bridges, VXLAN devices, OVS ports), as
/// `ns:interface`.
fn every_offload(topo: &Topology) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (role, h) in [
        ("h1", &topo.h[0]),
        ("h2", &topo.h[1]),
        ("t1", &topo.t[0]),
        ("t2", &topo.t[1]),
    ] {
        let links = h.run(&["ip", "-o", "link", "show"]).unwrap_or_default();
        // "7: under@if6: <BROADCAST,...>": the name ends at '@' or ':'.
        for name in links
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n))
            .filter(|n| *n != "lo")
        {
            out.push((format!("{role}:{name}"), offloads(h, name)));
        }
    }
    out
}

/// Why a variant cannot run on these real hosts, if it cannot.
pub fn missing_remote(v: Variant, r: &Remote) -> Option<String> {
    if v == Variant::KernelVxlanSw {
        return Some(
            "it turns the underlay NIC's tunnel segmentation offload off; not done to real hosts' NICs".into(),
        );
    }
    if matches!(v, Variant::OvsBridge | Variant::OvsQinq) {
        return Some(
            "Open vSwitch would need the host's underlay NIC itself as its port; not taken on real hosts".into(),
        );
    }
    if v.is_ovs() {
        if r.ovs_underlay.is_none() {
            return Some("Open vSwitch's userspace tunnels need underlay addresses of their own on its br-phy bridge (the hosts' NICs keep theirs): give --ovs-underlay IP1,IP2".into());
        }
        for f in &r.found {
            if let Some((_, install)) = f.missing.iter().find(|(t, _)| t == "ovs-vswitchd") {
                return Some(format!("{}: ovs-vswitchd not found: {install}", f.dest));
            }
        }
    }
    // What the variant needs on both hosts beyond the tools every one
    // needs: a tool, or a kernel feature.
    let mut needs = Vec::new();
    match v {
        Variant::TunlabStt => needs.push("nft"),
        Variant::KernelVxlan => needs.push("kernel vxlan"),
        v if v.is_ebpf() => needs.push("kernel bpf"),
        _ => {}
    }
    if v.tunlab_kind().is_some() && !v.is_ebpf() {
        needs.push("kernel tun");
    }
    for f in &r.found {
        for need in &needs {
            if let Some((what, install)) = f.missing.iter().find(|(t, _)| t == need) {
                return Some(format!("{}: {what} not found: {install}", f.dest));
            }
        }
    }
    None
}
