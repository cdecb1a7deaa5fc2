#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tunlab_switch::ofproto::openflow::nx_match::fuzz_pull(data)
});
