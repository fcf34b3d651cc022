//! Every command on every model of the corpus of real ONNX models (tests/model_corpus/README.md):
//! each cell must end in ✓ or a clean one-line refusal naming the model file, never a raw
//! error (a panic, a signal, several lines, a backend's own text), and must be what
//! `tests/model_corpus/expected.tsv` says. The table goes to stdout and to
//! `target/model-corpus-conformance.md`.
//!
//! `TRTKIT_CORPUS_BLESS=1` rewrites expected.tsv from what it observes, raw errors as `raw: …`.
//! A raw error passes only where expected.tsv lists it as such (a known gap, shown in the
//! table); a cell that turns raw fails. The corpus is fetched by
//! `scripts/fetch-model-corpus.sh` into `$TRTKIT_MODEL_CORPUS` (default `.cache/model-corpus`);
//! without it the test says so and passes.

mod support;

#[path = "model_corpus/cells.rs"]
mod cells;
#[path = "model_corpus/outcome.rs"]
mod outcome;
#[path = "model_corpus/table.rs"]
mod table;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Models run at the same time (each runs its commands one after another).
const PARALLEL_MODELS: usize = 2;

fn corpus_dir() -> PathBuf {
    std::env::var_os("TRTKIT_MODEL_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/model-corpus"))
}

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

#[test]
fn every_command_on_every_corpus_model_succeeds_or_refuses_cleanly() {
    let corpus = corpus_dir();
    if !corpus.is_dir() {
        println!("model corpus absent: run scripts/fetch-model-corpus.sh");
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/model_corpus");
    let manifest = std::fs::read_to_string(here.join("manifest.tsv")).unwrap();
    let models = cells::read_manifest(&manifest, &corpus);
    for m in &models {
        assert!(
            m.path.is_file(),
            "{} missing: run scripts/fetch-model-corpus.sh",
            m.path.display()
        );
    }
    let inspect_shapes = cells::inspect_takes_shapes();

    let next = AtomicUsize::new(0);
    let rows: Mutex<Vec<Option<table::Row>>> = Mutex::new(models.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL_MODELS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(model) = models.get(i) else { break };
                let dir = tempfile::tempdir().unwrap();
                let row = cells::run_model(model, dir.path(), inspect_shapes);
                rows.lock().unwrap()[i] = Some((model.name.clone(), row));
            });
        }
    });
    let rows: Vec<table::Row> = rows.into_inner().unwrap().into_iter().flatten().collect();

    let md = table::markdown(&rows, &format!("{}/", corpus.display()));
    println!("{md}");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    std::fs::write(target.join("model-corpus-conformance.md"), &md).unwrap();

    let expected_path = here.join("expected.tsv");
    if env_set("TRTKIT_CORPUS_BLESS") {
        std::fs::write(&expected_path, table::bless(&rows)).unwrap();
    }
    let expected =
        table::read_expected(&std::fs::read_to_string(&expected_path).unwrap_or_default());
    let problems = table::problems(&rows, &expected);
    assert!(
        problems.is_empty(),
        "{} cells are raw errors or differ from tests/model_corpus/expected.tsv \
         (TRTKIT_CORPUS_BLESS=1 rewrites it):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
