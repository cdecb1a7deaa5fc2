//! Compile the kernel datapath's programs (bpf/*.c) with clang for the BPF
//! target; the object is embedded in the binary and loaded by aya.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("datapath.o");
    for f in [
        "datapath.c",
        "tunlab.h",
        "maps.h",
        "key.h",
        "encap.h",
        "decap.h",
    ] {
        println!("cargo:rerun-if-changed=bpf/{f}");
    }
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
        // Debian keeps asm/types.h under the multiarch directory.
        .arg(format!(
            "-I/usr/include/{}-linux-gnu",
            std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into())
        ))
        .args(["-c", "bpf/datapath.c", "-o"])
        .arg(&obj)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{clang} failed to build bpf/datapath.c ({s})"),
        Err(e) => panic!(
            "cannot run {clang} ({e}): the kernel datapath is C built by clang; \
             install clang and libbpf-dev (scripts/install-deps does)"
        ),
    }
}
