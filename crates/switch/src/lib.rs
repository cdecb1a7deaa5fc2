//! One overlay node: its configuration, ports and packet loop.

pub mod config;
pub mod ctl;
pub mod dpif;
pub mod kernel;
pub mod mgmt;
pub mod ofrules;
pub mod port;
pub mod profile;
pub mod stats;
pub mod userspace;
pub mod workers;
