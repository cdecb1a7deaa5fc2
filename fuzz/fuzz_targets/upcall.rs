#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tunlab_switch::dpif::netdev::fuzz_upcall(data));
