//! The lab (`tunlab bench`): builds the articles' two-hypervisor topology
//! out of network namespaces, sets every datapath variant up side by side
//! on its own copy of it, measures them in rounds of shuffled samples with
//! iperf3 and `tunlab rr` (netperf's request/response), and reports each variant's ratio to
//! a baseline with its interval and a verdict.
//!
//! ```text
//!  netns T1 (tenant)     netns H1 (host)                 netns H2 (host)     netns T2 (tenant)
//!  192.168.30.1 ─────── [datapath] ─ under 172.30.0.1 ═══ 172.30.0.2 under ─ [datapath] ─────── 192.168.30.2
//! ```
//!
//! A run, as data flows: [`plan`] (what to run) → [`bed`] (the variants
//! set up side by side, on [`variant`]'s datapaths and [`host`]s) →
//! [`rounds`] (which cells each round measures, in what order, and when
//! to stop) → [`measure`] (one sample: [`traffic`] or [`first_packet`]
//! for the tools, [`meter`] for CPU, [`guard`] for what else ran) →
//! [`stats`] (paired ratios and their intervals) → [`results`]
//! (`results.json`) → [`report`], [`chart`], [`html`] (tables, forest
//! plots, the page) and [`compare`] (two runs). [`run`] strings them
//! together. [`remote`] reaches real hosts; [`pvp`], [`setup_rate`] and
//! [`soak`] are the other experiments on the same hosts and datapaths;
//! [`article`] runs a reference article's experiment by name and checks
//! its findings against what was measured.

pub mod article;
pub mod bed;
pub mod chart;
pub mod compare;
pub mod first_packet;
pub use tunlab_netio::cpu;
pub mod guard;
pub mod host;
pub mod html;
pub mod measure;
pub mod meter;
pub mod ovs;
pub mod plan;
pub mod pvp;
pub mod remote;
pub mod report;
pub mod results;
pub mod rounds;
pub mod rr;
pub mod run;
pub mod running;
pub mod sample;
pub mod setup_rate;
pub mod soak;
pub mod stats;
pub mod tenantgen;
pub mod topology;
pub mod traffic;
pub mod variant;

/// Why a bench could not run (as opposed to one test failing, which is a
/// result).
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{0}")]
    Setup(String),
    #[error("{what}: {msg}")]
    Usage { what: &'static str, msg: String },
    #[error("interrupted")]
    Interrupted,
    /// `ssh` itself failed (exit 255): the host is unreachable or the
    /// connection was lost, as opposed to a command that failed there.
    #[error("{dest}: SSH failed: {msg}")]
    Ssh { dest: String, msg: String },
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
}

impl From<tunlab_netio::netns::CmdError> for LabError {
    fn from(e: tunlab_netio::netns::CmdError) -> LabError {
        LabError::Setup(e.to_string())
    }
}
