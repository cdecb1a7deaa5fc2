//! The lab (`tunlab bench`): builds the articles' two-hypervisor topology
//! out of network namespaces, puts one datapath variant at a time on it,
//! runs the traffic tests with trusted tools (iperf3, sockperf), samples
//! each until its spread settles (pbench-uperf's rule), and reports the
//! variants side by side.
//!
//! ```text
//!  netns T1 (tenant)     netns H1 (host)                 netns H2 (host)     netns T2 (tenant)
//!  192.168.30.1 ─────── [datapath] ─ under 172.30.0.1 ═══ 172.30.0.2 under ─ [datapath] ─────── 192.168.30.2
//! ```
//!
//! Layers: [`host`] runs commands "on a host" (a namespace here, or a real
//! host over SSH), [`remote`] reaches real hosts (the check before a run,
//! provisioning, CPU probes, `--plan`, `--cleanup`), [`variant`] sets a
//! datapath up and down,
//! [`traffic`] runs one test and parses the tool's figures, [`cpu`]
//! samples CPU, [`stats`] holds the sample rule, [`report`] makes the
//! tables, [`chart`] and [`html`] the charts and the report page,
//! [`compare`] sets two runs side by side, and [`run`] drives a whole
//! bench.

pub mod chart;
pub mod compare;
pub mod first_packet;
pub use tunlab_netio::cpu;
pub mod host;
pub mod html;
pub mod ovs;
pub mod pvp;
pub mod remote;
pub mod report;
pub mod run;
pub mod setup_rate;
pub mod soak;
pub mod stats;
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
