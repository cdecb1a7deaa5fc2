//! Compile the kernel datapath's programs (bpf/*.c) with clang for the BPF
//! target; the object is embedded in the binary and loaded by aya.

fn main() {
    let headers = [
        "common.h",
        "maps.h",
        "police.h",
        "stats.h",
        "checksum.h",
        "key.h",
        "encap.h",
        "decap.h",
    ];
    tunlab_bpf::build(
        "datapath.c",
        &headers,
        &[],
        &tunlab_bpf::out_dir().join("datapath.o"),
    );
    // An experiment on the cache's table, run by benches/table.rs.
    tunlab_bpf::build(
        "tablebench.c",
        &[],
        &[],
        &tunlab_bpf::out_dir().join("tablebench.o"),
    );
}
