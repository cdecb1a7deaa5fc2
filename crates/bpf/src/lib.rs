//! What tunlab's BPF programs share, whichever crate holds them (the
//! kernel datapath's in `tunlab-ebpf`, the generator's XDP counter and
//! reflector in `tunlab-gen`):
//! - [`build`]: a build script compiles a program's C with clang for the
//!   BPF target (the object is then embedded with aya's
//!   `include_bytes_aligned!`);
//! - [`test_run`]: a test runs a loaded program on bytes with
//!   BPF_PROG_TEST_RUN, no device involved.

pub mod test_run;

/// Compile `bpf/SRC` (relative to the calling crate) to `obj` with clang
/// (`$CLANG`, else `clang`), optimised, with debug info, warnings as
/// errors, and `extra` flags; tell cargo to rebuild when `SRC` or any of
/// `headers` (in `bpf/`) changes. Panics with what to install when clang
/// is missing: a build script has no other way to fail.
pub fn build(src: &str, headers: &[&str], extra: &[&str], obj: &std::path::Path) {
    for f in std::iter::once(&src).chain(headers) {
        println!("cargo:rerun-if-changed=bpf/{f}");
    }
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let status = std::process::Command::new(&clang)
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
            "cannot run {clang} ({e}): tunlab's BPF programs are C built by clang; \
             install clang and libbpf-dev (scripts/install-deps does)"
        ),
    }
}

/// The build script's output directory.
pub fn out_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_else(|| ".".into()))
}
