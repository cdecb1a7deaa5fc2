//! The generator's programs in the kernel (`bpf/`, C built by clang in
//! build.rs, loaded by aya): the XDP counter that counts a run's frames
//! where they arrive ([`count`]), and the PVP tenant's reflector
//! ([`reflect`]).

pub mod count;
pub mod reflect;

/// Why a program could not be loaded, attached or read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading or attaching (the verifier's log is in the message).
    #[error("{0}")]
    Load(String),
    #[error("map {map}: {msg}")]
    Map { map: &'static str, msg: String },
}

fn map_err(map: &'static str) -> impl Fn(aya::maps::MapError) -> Error {
    move |e| Error::Map {
        map,
        msg: e.to_string(),
    }
}

/// Whether TC programs attach through tcx (kernel 6.6 and later).
fn tcx() -> bool {
    aya::util::KernelVersion::current().is_ok_and(|v| v >= aya::util::KernelVersion::new(6, 6, 0))
}
