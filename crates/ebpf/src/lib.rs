//! tunlab's kernel datapath: TC eBPF programs that forward the flows the
//! switch has cached (`bpf/`, C built by clang in build.rs) and the loader
//! that attaches them and fills their maps (aya, pure Rust).
//!
//! The programs know nothing of flow rules: the switch classifies a
//! flow's first packet in user space, forwards it itself and installs
//! the result here under the megaflow-masked key. This crate never
//! classifies and never decides policy.
//!
//! Beside it, the generator's XDP counter (`bpf/count.c`, [`count`]).

pub mod count;
pub mod datapath;
pub mod maps;
pub mod probe;
pub mod reflect;
pub mod template;
pub mod test_run;

pub use datapath::{Error, KernelDatapath};
pub use template::{Destination, TemplateError};
