//! tunlab's kernel datapath: TC eBPF programs that forward the flows the
//! switch has cached (`bpf/`, C built by clang in build.rs) and the loader
//! that attaches them and fills their maps (aya, pure Rust).
//!
//! The programs know nothing of flow rules: the switch classifies a
//! flow's first packet in user space, forwards it itself and installs
//! the result here under the megaflow-masked key. This crate never
//! classifies and never decides policy.

pub mod datapath;
pub mod maps;
pub mod probe;
pub mod template;

pub use datapath::{Error, KernelDatapath};
pub use template::{Destination, TemplateError};
