#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tunlab_dp::flow::fuzz_parse(data));
