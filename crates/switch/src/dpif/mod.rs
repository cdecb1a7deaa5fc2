//! The datapaths, beside each other, as Open vSwitch's dpif layer:
//! [`provider`] is what ofproto asks of a datapath, in types of its own;
//! [`netdev`] is the userspace datapath (tunlab's slow path, serving
//! every port kind from user space) and [`ebpf`] the kernel's (TC eBPF
//! programs forwarding cached flows).

pub mod ebpf;
pub mod netdev;
pub mod provider;
