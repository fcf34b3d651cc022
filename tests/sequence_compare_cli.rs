//! `trtkit compare` on `[N, steps, classes]` class scores: guessed as a sequence (not a YOLO
//! head), planted step changes give exactly the expected step and CTC-reading agreement, and
//! `--task classify` says why it shows no top-k table.

mod support;

use support::{assert_clean_error, save, stdout_of_success, trtkit};
use trtkit::data::npz;
use trtkit::onnx::test_models::recogniser;
use trtkit::tensor::{HostTensor, TensorData};

/// Steps and classes of the planted sequences.
const STEPS: usize = 6;
const CLASSES: usize = 5;

/// Softmax-like scores `[N, STEPS, CLASSES]`: 0.6 on each step's best class, the rest shared.
fn scores(best: &[[usize; STEPS]]) -> HostTensor {
    let rest = 0.4 / (CLASSES - 1) as f32;
    let mut data = vec![rest; best.len() * STEPS * CLASSES];
    for (i, seq) in best.iter().enumerate() {
        for (t, &c) in seq.iter().enumerate() {
            data[(i * STEPS + t) * CLASSES + c] = 0.6;
        }
    }
    HostTensor::new(
        "softmax_out",
        vec![best.len(), STEPS, CLASSES],
        TensorData::F32(data),
    )
    .unwrap()
}

fn saved(dir: &std::path::Path, name: &str, t: HostTensor) -> String {
    let p = dir.join(name);
    npz::save(&p, &[t]).unwrap();
    p.to_str().unwrap().to_string()
}

fn json_of(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&stdout_of_success(&trtkit(args))).unwrap()
}

#[test]
fn planted_step_changes_give_exactly_the_expected_agreement() {
    let dir = tempfile::tempdir().unwrap();
    // B reads [1, 2], [3, 3], [4], [1]; A: the same; one substitution; one insertion; the
    // last step of sample 3's run turned blank (one step differs, the reading is the same).
    let b = scores(&[
        [1, 1, 0, 2, 2, 0],
        [3, 0, 3, 0, 0, 0],
        [4, 4, 4, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
    ]);
    let a = scores(&[
        [1, 1, 0, 2, 2, 0],
        [3, 0, 2, 0, 0, 0],
        [4, 4, 4, 0, 2, 0],
        [1, 1, 1, 0, 0, 0],
    ]);
    let (a, b) = (saved(dir.path(), "a.npz", a), saved(dir.path(), "b.npz", b));
    let r = json_of(&["compare", &a, &b, "--json"]);
    let task = &r["task"];
    assert_eq!(task["task"], "sequence", "{task}");
    assert_eq!(task["guessed"], true);
    let s = &task["sequence"];
    assert_eq!(
        (s["samples"].as_u64(), s["steps"].as_u64()),
        (Some(4), Some(6))
    );
    // 24 steps, 3 differ.
    assert_eq!(s["step_agreement_pct"].as_f64(), Some(87.5));
    assert_eq!(s["exact_match_pct"].as_f64(), Some(50.0));
    assert_eq!(s["mean_edit_distance"].as_f64(), Some(0.5));
    assert_eq!(s["mean_length_b"].as_f64(), Some(1.5));
    assert!(task.get("detect").is_none());

    let text = stdout_of_success(&trtkit(&["compare", &a, &b]));
    assert!(text.contains("task: sequence (guessed"), "{text}");
    assert!(text.contains("exact match %"), "{text}");
    assert!(!text.contains("boxes of A"), "{text}");

    // With 3 as the blank, B's sample 1 reads nothing and A's reads [2].
    let r = json_of(&["compare", &a, &b, "--blank", "3", "--json"]);
    assert_eq!(r["task"]["sequence"]["blank"], 3);
    let out = trtkit(&["compare", &a, &b, "--blank", "9"]);
    assert_clean_error(&out, 1, &["blank class 9", "--blank"]);
}

#[test]
fn a_recogniser_is_a_sequence_and_classify_says_why_it_has_no_top_k() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "rec.onnx", recogniser(40, 30, None));
    let model = model.to_str().unwrap();
    let r = json_of(&["compare", model, model, "--num-samples", "5", "--json"]);
    assert_eq!(r["task"]["task"], "sequence", "{}", r["task"]);
    let s = &r["task"]["sequence"];
    assert_eq!(
        (s["samples"].as_u64(), s["steps"].as_u64()),
        (Some(5), Some(40))
    );
    assert_eq!(s["classes"].as_u64(), Some(30));
    assert_eq!(s["exact_match_pct"].as_f64(), Some(100.0));
    assert!(s["mean_length_b"].as_f64().unwrap() > 0.0, "{s}");

    let r = json_of(&[
        "compare",
        model,
        model,
        "--num-samples",
        "2",
        "--task",
        "classify",
        "--json",
    ]);
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("no top-k table") && notes.contains("--task sequence"),
        "{notes}"
    );
    let text = stdout_of_success(&trtkit(&[
        "compare",
        model,
        model,
        "--num-samples",
        "2",
        "--task",
        "classify",
    ]));
    assert!(text.contains("note: no top-k table"), "{text}");
}
