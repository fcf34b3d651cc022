//! The library's public surface is a declared list: `lib.rs` makes public exactly the modules
//! below, each named by the binary, a test, a benchmark or an example (the users a future Python
//! binding would join); every other module is `pub(crate)`. A module made public without a user,
//! or one a user needs but `lib.rs` hides, fails here.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use support::rust_files;

/// The public modules of the library, with who needs each.
const PUBLIC: &[(&str, &str)] = &[
    (
        "backend",
        "tests and examples open models and engines through backend::open",
    ),
    ("bench", "the bench tests read journals and cell keys"),
    (
        "calibration",
        "tests make calibration samples; the histogram benchmark",
    ),
    ("cli", "the binary: flags parsed into each job's config"),
    ("cuda", "the GPU suite and the NVML overhead example"),
    (
        "data",
        "tests decode images, load arrays and make synthetic inputs",
    ),
    ("digest", "tests compute the model hashes keys are made of"),
    (
        "fuzz_targets",
        "the fuzz tests (with the test-support feature)",
    ),
    (
        "jobs",
        "tests, benchmarks and examples run jobs and read their reports",
    ),
    (
        "keyed_artifact",
        "tests read the key files beside artifacts",
    ),
    ("metrics", "tests and benchmarks of the arithmetic"),
    ("onnx", "tests build, rewrite and inspect models"),
    ("progress", "jobs called from tests take a progress sink"),
    ("quantize", "tests read search reports and precision plans"),
    ("report", "tests render reports"),
    ("tensor", "the value types every public config is made of"),
    ("trt", "tests find TensorRT and read engine sidecars"),
];

/// The modules `lib.rs` declares `pub` (not `pub(crate)`).
fn public_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches(';').trim().to_string())
        .collect()
}

#[test]
fn lib_exposes_exactly_the_declared_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let declared: BTreeSet<String> = PUBLIC.iter().map(|(m, _)| m.to_string()).collect();
    assert_eq!(
        public_modules(&lib),
        declared,
        "src/lib.rs's `pub mod` lines"
    );
}

#[test]
fn every_public_module_has_a_user_outside_the_library() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("src/main.rs")];
    for dir in ["tests", "benches", "examples"] {
        rust_files(&root.join(dir), &mut files);
    }
    let text: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    for (module, why) in PUBLIC {
        let named = text.contains(&format!("trtkit::{module}::"))
            || text.contains(&format!("trtkit::{module};"))
            || text.contains(&format!("trtkit::{module}::{{"));
        assert!(
            named,
            "{module} is public ({why}), yet nothing outside the library names it"
        );
    }
}

#[test]
fn the_reader_tells_pub_from_pub_crate() {
    let lib = "pub mod a;\npub(crate) mod b;\n#[cfg(test)]\npub mod c;\nmod d;\n";
    assert_eq!(
        public_modules(lib),
        BTreeSet::from(["a".to_string(), "c".to_string()])
    );
}
