//! Compile the kernel datapath's programs (bpf/*.c) with clang for the BPF
//! target; the object is embedded in the binary and loaded by aya.

fn main() {
    let headers = ["tunlab.h", "maps.h", "key.h", "encap.h", "decap.h"];
    tunlab_bpf::build(
        "datapath.c",
        &headers,
        &[],
        &tunlab_bpf::out_dir().join("datapath.o"),
    );
}
