//! Can this kernel run the kernel datapath? `datapath = "auto"` asks this
//! at start and says which datapath it chose and why.

use crate::datapath::KernelDatapath;

/// Load the programs through this kernel's verifier with tiny maps and
/// drop them: the answer is Ok, or the feature that is missing, named.
pub fn probe() -> Result<(), String> {
    if !std::path::Path::new("/sys/fs/bpf").exists() {
        return Err("no BPF filesystem at /sys/fs/bpf (CONFIG_BPF_SYSCALL)".into());
    }
    KernelDatapath::load(16, 4, None)
        .map(drop)
        .map_err(|e| format!("the kernel refused tunlab's TC programs: {e}"))
}
