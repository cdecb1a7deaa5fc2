//! Fuzz corpora (fuzz/corpus/TARGET/) replayed as regression inputs.

use std::path::Path;

/// Every file of `target`'s corpus through `body`, none panicking.
fn replay(target: &str, body: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut ran = 0;
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        assert!(
            std::panic::catch_unwind(|| body(&data)).is_ok(),
            "{target} panics on {}",
            path.display()
        );
        ran += 1;
    }
    assert!(ran > 0, "{target}: empty corpus");
}

#[test]
fn decode_corpus_still_passes() {
    replay("decode_frame", tunlab::fuzz_decode);
}

#[test]
fn gen_parse_corpus_still_passes() {
    replay("gen_parse", tunlab_gen::fuzz_parse);
}

#[test]
fn gen_receive_corpus_still_passes() {
    replay("gen_receive", tunlab_gen::fuzz_receive);
}

/// What comes up from a tenant or upcall TAP (virtio-net header + frame).
#[test]
fn upcall_corpus_still_passes() {
    replay("upcall", tunlab_switch::dpif::netdev::fuzz_upcall);
}

/// OXM and NXM matches off the wire (ofproto/openflow/nx_match.rs).
#[test]
fn nx_match_corpus_still_passes() {
    replay(
        "nx_match",
        tunlab_switch::ofproto::openflow::nx_match::fuzz_pull,
    );
}
