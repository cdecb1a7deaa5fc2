//! The decoder's fuzz corpus (fuzz/corpus/decode_frame/) as regression inputs.

use std::path::Path;

#[test]
fn decode_corpus_still_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/decode_frame");
    let mut ran = 0;
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        assert!(
            std::panic::catch_unwind(|| tunlab::fuzz_decode(&data)).is_ok(),
            "decode panics on {}",
            path.display()
        );
        ran += 1;
    }
    assert!(ran > 0);
}

#[test]
fn gen_parse_corpus_still_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/gen_parse");
    let mut ran = 0;
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        assert!(
            std::panic::catch_unwind(|| tunlab_gen::fuzz_parse(&data)).is_ok(),
            "the generator's parser panics on {}",
            path.display()
        );
        ran += 1;
    }
    assert!(ran > 0);
}
