//! Compile the generator's XDP programs (bpf/*.c) with clang for the BPF
//! target; the objects are embedded in the binary and loaded by aya.

fn main() {
    let out = tunlab_bpf::out_dir();
    // The counter uses atomic exchange and compare-and-swap: BPF ISA v3
    // (Linux 5.12).
    tunlab_bpf::build("count.c", &[], &["-mcpu=v3"], &out.join("count.o"));
    tunlab_bpf::build("reflect.c", &[], &[], &out.join("reflect.o"));
}
