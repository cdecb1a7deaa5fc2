#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tunlab_gen::fuzz_receive(data));
