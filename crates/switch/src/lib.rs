//! One overlay node: its configuration, ports and packet loop.

pub mod config;
pub mod ctl;
pub mod dpif;
pub mod mgmt;
pub mod node;
pub mod ofproto;
pub mod port;
pub mod profile;
pub mod stats;
pub mod workers;
