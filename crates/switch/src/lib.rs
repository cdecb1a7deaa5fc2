//! One overlay node, in Open vSwitch's layers (each module uses only those
//! listed before it):
//!
//! - `config`, `port`, `stats`, `profile`: what the node is asked to be,
//!   what a port means, the counters;
//! - `dpif`: the datapaths beside each other (`netdev` the userspace one,
//!   `ebpf` the kernel's) and the traits they answer to (`provider`);
//! - `ofproto`: the OpenFlow switch above them (flow table, TLV map,
//!   upcalls, revalidation, PACKET_IN);
//! - `node`: one worker's ofproto over its datapath; `workers`: their
//!   threads and the revalidator;
//! - `api`: the typed calls every door makes; `access`: who may connect;
//! - `ctl` (the control socket's text requests) and `mgmt` (OpenFlow), the
//!   two doors.

pub mod access;
pub mod api;
pub mod config;
pub mod ctl;
pub mod dpif;
pub mod log;
pub mod metrics;
pub mod mgmt;
pub mod node;
pub mod ofproto;
pub mod port;
pub mod profile;
pub mod reload;
pub mod stats;
pub mod workers;
