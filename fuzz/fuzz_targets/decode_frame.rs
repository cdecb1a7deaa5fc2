#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tunlab::fuzz_decode(data));
