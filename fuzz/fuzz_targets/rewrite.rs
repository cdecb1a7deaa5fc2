#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tunlab_wire::fuzz_targets::rewrite(data));
