//! The namespace tests every datapath must pass, written once and run on
//! each: the userspace datapath (`userspace::…`, tenants on TAPs) and the
//! kernel's (`ebpf::…`, `datapath = "ebpf"`, tenants on veths, where each
//! test also checks that the kernel carried the traffic, not only the
//! slow path). The tests of one datapath alone are in switch_netns.rs and
//! kernel_netns.rs.
//!
//! ```text
//!  netns ta          netns hv1                    netns hv2          netns tb
//!  192.168.7.1 ── [tunlab switch] 172.31.0.1 ═══ 172.31.0.2 [tunlab switch] ── 192.168.7.2
//! ```
//!
//! Needs root; namespaces and processes are removed on success, failure
//! and interruption.

mod common;

use common::*;

/// Each `name(dp) { body }` becomes `userspace::name` and `ebpf::name`,
/// with `dp` the datapath.
macro_rules! on_every_datapath {
    ($($(#[$doc:meta])* $name:ident($dp:ident) $body:block)*) => {
        mod userspace {
            use super::*;
            $( $(#[$doc])* #[test] fn $name() { let $dp = Datapath::Userspace; $body } )*
        }
        mod ebpf {
            use super::*;
            $( $(#[$doc])* #[test] fn $name() { let $dp = Datapath::Kernel; $body } )*
        }
    };
}

on_every_datapath! {
    /// Traffic both ways over each encapsulation, IPv4 underlay.
    geneve(dp) { two_nodes("geneve", false, dp) }
    vxlan(dp) { two_nodes("vxlan", false, dp) }
    gre(dp) { two_nodes("gre", false, dp) }
    nvgre(dp) { two_nodes("nvgre", false, dp) }
    /// Geneve over an IPv6 underlay.
    geneve_ipv6_underlay(dp) { two_nodes("geneve", true, dp) }

    /// Isolation: a VNI no rule accepts is dropped and counted; nothing
    /// reaches the tenant.
    wrong_vni_is_dropped_and_counted(dp) { wrong_vni(dp) }
    /// An outer source no tunnel port expects is dropped and counted.
    unknown_remote_is_dropped_and_counted(dp) { unknown_remote(dp) }
    /// Malformed underlay packets (short, options overrunning, an unknown
    /// critical option, no inner frame, garbage) and odd tenant frames:
    /// each dropped with its reason, forwarding goes on.
    malformed_packets_are_dropped_and_counted(dp) { malformed_packets(dp) }
    /// Frames crafted in one tenant or on the underlay never reach the
    /// other tenant, and the refused ones are counted.
    crafted_frames_stay_in_their_tenant(dp) { crafted_frames(dp) }

    /// Tenant and tunnel ports added and removed while running; the added
    /// ports carry traffic (on the kernel datapath, in the kernel).
    ports_added_and_removed_at_run_time(dp) { ports_at_run_time(dp) }

    /// The underlay link down for a second under a TCP stream, then up.
    underlay_down_and_up_under_load(dp) { faults::underlay_down_and_up_under_load(dp) }
    /// The underlay MTU lowered under a TCP stream.
    underlay_mtu_lowered_under_load(dp) { faults::underlay_mtu_lowered_under_load(dp) }
    /// A tenant port deleted under load.
    tenant_port_deleted_under_load(dp) { faults::tenant_port_deleted_under_load(dp) }
    /// A flooding tenant policed at 20 Mbit/s (`ingress_policing_rate`):
    /// the rest is dropped and counted, the other tenant's stream goes on.
    policed_flood_leaves_the_other_tenant_alone(dp) {
        faults::policed_flood_leaves_the_other_tenant_alone(dp)
    }
}
