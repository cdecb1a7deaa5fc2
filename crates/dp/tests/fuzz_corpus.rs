//! The flow parser's fuzz corpus (fuzz/corpus/flow_parse/) as regression inputs.

use std::path::Path;

#[test]
fn flow_parse_corpus_still_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/flow_parse");
    let mut ran = 0;
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(|| tunlab_dp::flow::fuzz_parse(&data));
        assert!(
            r.is_ok(),
            "flow parser fails its invariants on {}",
            path.display()
        );
        ran += 1;
    }
    assert!(ran > 0);
}
