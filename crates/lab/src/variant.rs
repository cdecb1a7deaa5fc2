//! The datapaths compared, by name: the kernel bridging the tenant onto
//! the underlay (no tunnel), the kernel's VXLAN device, Open vSwitch's
//! userspace datapath and tunlab's switch, per encapsulation; what each
//! costs in headers and needs installed. [`crate::running`] sets each up
//! on a [`crate::topology::Topology`].

use serde::{Deserialize, Serialize};

/// Underlay and tenant addresses of the two sides.
pub const UNDER: [&str; 2] = ["172.30.0.1", "172.30.0.2"];
pub const TENANT: [&str; 2] = ["192.168.30.1", "192.168.30.2"];
pub const UNDERLAY_MTU: u16 = 1500;

/// One datapath to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    None,
    KernelVxlan,
    /// The kernel's VXLAN with the underlay's UDP-tunnel segmentation
    /// offload off: the kernel cuts each tunnelled TSO frame into
    /// segments before the underlay (the articles' "VXLAN-SW", or
    /// `ethtool -K tx-udp_tnl-segmentation off`).
    KernelVxlanSw,
    TunlabGeneve,
    TunlabGeneveOvn,
    TunlabVxlan,
    TunlabGre,
    TunlabNvgre,
    TunlabStt,
    TunlabQinq,
    TunlabEbpfGeneve,
    TunlabEbpfGeneveOvn,
    TunlabEbpfVxlan,
    TunlabEbpfGre,
    TunlabEbpfNvgre,
    TunlabEbpfQinq,
    /// `tunlab-ebpf-geneve` with its metrics endpoint on and scraped
    /// every second on both hosts, as Prometheus would: paired with
    /// `tunlab-ebpf-geneve`, what a scrape costs the datapath.
    TunlabEbpfGeneveScraped,
    OvsBridge,
    OvsVxlan,
    OvsGeneve,
    OvsGeneveOvn,
    OvsGre,
    OvsQinq,
}

impl Variant {
    pub const ALL: [Variant; 23] = [
        Variant::None,
        Variant::KernelVxlan,
        Variant::KernelVxlanSw,
        Variant::TunlabGeneve,
        Variant::TunlabGeneveOvn,
        Variant::TunlabVxlan,
        Variant::TunlabGre,
        Variant::TunlabNvgre,
        Variant::TunlabStt,
        Variant::TunlabQinq,
        Variant::TunlabEbpfGeneve,
        Variant::TunlabEbpfGeneveOvn,
        Variant::TunlabEbpfVxlan,
        Variant::TunlabEbpfGre,
        Variant::TunlabEbpfNvgre,
        Variant::TunlabEbpfQinq,
        Variant::TunlabEbpfGeneveScraped,
        Variant::OvsBridge,
        Variant::OvsVxlan,
        Variant::OvsGeneve,
        Variant::OvsGeneveOvn,
        Variant::OvsGre,
        Variant::OvsQinq,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::None => "none",
            Variant::KernelVxlan => "kernel-vxlan",
            Variant::KernelVxlanSw => "kernel-vxlan-sw",
            Variant::TunlabGeneve => "tunlab-geneve",
            Variant::TunlabGeneveOvn => "tunlab-geneve-ovn",
            Variant::TunlabVxlan => "tunlab-vxlan",
            Variant::TunlabGre => "tunlab-gre",
            Variant::TunlabNvgre => "tunlab-nvgre",
            Variant::TunlabStt => "tunlab-stt",
            Variant::TunlabQinq => "tunlab-qinq",
            Variant::TunlabEbpfGeneve => "tunlab-ebpf-geneve",
            Variant::TunlabEbpfGeneveOvn => "tunlab-ebpf-geneve-ovn",
            Variant::TunlabEbpfVxlan => "tunlab-ebpf-vxlan",
            Variant::TunlabEbpfGre => "tunlab-ebpf-gre",
            Variant::TunlabEbpfNvgre => "tunlab-ebpf-nvgre",
            Variant::TunlabEbpfQinq => "tunlab-ebpf-qinq",
            Variant::TunlabEbpfGeneveScraped => "tunlab-ebpf-geneve-scraped",
            Variant::OvsBridge => "ovs-bridge",
            Variant::OvsVxlan => "ovs-vxlan",
            Variant::OvsGeneve => "ovs-geneve",
            Variant::OvsGeneveOvn => "ovs-geneve-ovn",
            Variant::OvsGre => "ovs-gre",
            Variant::OvsQinq => "ovs-qinq",
        }
    }

    pub fn parse(s: &str) -> Result<Variant, String> {
        if let Some(v) = Variant::ALL.into_iter().find(|v| v.name() == s) {
            return Ok(v);
        }
        Err(format!(
            "'{s}' is not a variant; valid: {}",
            Variant::ALL.map(Variant::name).join(", ")
        ))
    }

    /// tunlab's port type for the tunlab variants.
    pub(crate) fn tunlab_kind(self) -> Option<&'static str> {
        Some(match self {
            Variant::TunlabGeneve
            | Variant::TunlabGeneveOvn
            | Variant::TunlabEbpfGeneve
            | Variant::TunlabEbpfGeneveScraped
            | Variant::TunlabEbpfGeneveOvn => "geneve",
            Variant::TunlabVxlan | Variant::TunlabEbpfVxlan => "vxlan",
            Variant::TunlabGre | Variant::TunlabEbpfGre => "gre",
            Variant::TunlabNvgre | Variant::TunlabEbpfNvgre => "nvgre",
            Variant::TunlabStt => "stt",
            Variant::TunlabQinq | Variant::TunlabEbpfQinq => "qinq",
            _ => return None,
        })
    }

    /// Bytes of the tenant's IP MTU the encapsulation takes from the
    /// 1500-byte underlay (inner Ethernet counted where it is carried).
    pub fn overhead(self) -> u16 {
        match self {
            Variant::None | Variant::OvsBridge => 0,
            Variant::KernelVxlan
            | Variant::KernelVxlanSw
            | Variant::TunlabVxlan
            | Variant::TunlabGeneve
            | Variant::TunlabEbpfVxlan
            | Variant::TunlabEbpfGeneve
            | Variant::TunlabEbpfGeneveScraped
            | Variant::OvsVxlan
            | Variant::OvsGeneve => 50,
            Variant::TunlabGeneveOvn | Variant::TunlabEbpfGeneveOvn | Variant::OvsGeneveOvn => 58,
            Variant::TunlabGre
            | Variant::TunlabNvgre
            | Variant::TunlabEbpfGre
            | Variant::TunlabEbpfNvgre
            | Variant::OvsGre => 42,
            Variant::TunlabStt => 72,
            Variant::TunlabQinq | Variant::TunlabEbpfQinq | Variant::OvsQinq => 4,
        }
    }

    /// tunlab on its kernel (eBPF) datapath, tenants on veth ports.
    pub fn is_ebpf(self) -> bool {
        self.name().starts_with("tunlab-ebpf-")
    }

    pub fn is_ovs(self) -> bool {
        self.name().starts_with("ovs-")
    }

    pub fn tenant_mtu(self) -> u16 {
        UNDERLAY_MTU - self.overhead()
    }

    /// What is missing to run this variant, with the install command.
    pub fn missing(self) -> Option<String> {
        let need: &[(&str, &str)] = match self {
            Variant::TunlabStt => &[("nft", "nftables")],
            Variant::KernelVxlanSw => &[("ethtool", "ethtool")],
            v if v.is_ovs() => &[
                ("ovs-vswitchd", "openvswitch-switch"),
                ("ethtool", "ethtool"),
            ],
            _ => &[],
        };
        need.iter()
            .find(|(bin, _)| !on_path(bin))
            .map(|(bin, pkg)| format!("{bin} not found: apt-get install {pkg}"))
    }
}

pub fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
}
