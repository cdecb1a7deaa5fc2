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
    println!("cargo:rerun-if-changed=bpf/count.c");
    println!("cargo:rerun-if-changed=bpf/reflect.c");
    // The generator's XDP counter uses atomic exchange and
    // compare-and-swap: BPF ISA v3 (Linux 5.12).
    build("datapath.c", &[], &obj);
    build("count.c", &["-mcpu=v3"], &out.join("count.o"));
    build("reflect.c", &[], &out.join("reflect.o"));
}

fn build(src: &str, extra: &[&str], obj: &std::path::Path) {
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
        .args(extra)
        // Debian keeps asm/types.h under the multiarch directory.
        .arg(format!(
            "-I/usr/include/{}-linux-gnu",
            std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into())
        ))
        .args(["-c", &format!("bpf/{src}"), "-o"])
        .arg(obj)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{clang} failed to build bpf/{src} ({s})"),
        Err(e) => panic!(
            "cannot run {clang} ({e}): the kernel datapath is C built by clang; \
             install clang and libbpf-dev (scripts/install-deps does)"
        ),
    }
}
