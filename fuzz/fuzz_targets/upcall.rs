#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tunlab_switch::userspace::fuzz_upcall(data));
