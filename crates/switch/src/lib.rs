//! One overlay node: its configuration, ports and packet loop.

pub mod config;
pub mod ctl;
pub mod kernel;
pub mod node;
pub mod profile;
pub mod workers;
