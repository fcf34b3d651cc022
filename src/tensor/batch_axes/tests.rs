use super::*;

fn sym(s: &str) -> Dim {
    Dim::Symbol(s.into())
}

fn fixed(n: i64) -> Dim {
    Dim::Fixed(n)
}

/// `(name, dims)` pairs as the inference reads them.
fn declared<'a>(list: &'a [(&'a str, Vec<Dim>)]) -> Vec<Declared<'a>> {
    list.iter()
        .map(|(name, dims)| Declared {
            name,
            dims: Some(dims),
        })
        .collect()
}

fn request(choices: &[&str]) -> BatchAxisRequest {
    BatchAxisRequest(choices.iter().map(|c| c.parse().unwrap()).collect())
}

#[test]
fn a_recurrent_state_is_batched_where_it_carries_the_shared_symbol() {
    let inputs = [
        ("x", vec![sym("N"), fixed(16)]),
        ("state", vec![fixed(2), sym("N"), fixed(8)]),
        ("sr", vec![]),
    ];
    let outputs = [
        ("y", vec![sym("N"), fixed(1)]),
        ("stateN", vec![sym("L"), sym("N"), sym("H")]),
    ];
    let axes = BatchAxes::infer(&declared(&inputs), &declared(&outputs), &request(&[])).unwrap();
    assert_eq!(axes.to_string(), "x=0 state=1 sr=none y=0 stateN=1");
    assert_eq!(axes.unbatched_inputs(), ["sr"]);
    assert_eq!(
        axes.notes(),
        ["input 'sr' has no batch axis: fed as given, the same for every sample"]
    );
    assert!(!axes.all_on_axis_0());
    assert_eq!(
        axes.axis("activation").unwrap(),
        Some(0),
        "not listed: axis 0"
    );
}

#[test]
fn a_fixed_side_input_has_no_batch_axis_and_a_static_model_keeps_axis_0() {
    let inputs = [
        ("image", vec![sym("batch"), fixed(3), fixed(8), fixed(8)]),
        ("table", vec![fixed(10), fixed(4)]),
    ];
    let outputs = [("logits", vec![sym("batch"), fixed(10)])];
    let axes = BatchAxes::infer(&declared(&inputs), &declared(&outputs), &request(&[])).unwrap();
    assert_eq!(axes.to_string(), "image=0 table=none logits=0");
    let inputs = [
        ("image", vec![fixed(1), fixed(3)]),
        ("table", vec![fixed(10), fixed(4)]),
    ];
    let outputs = [("logits", vec![fixed(1), fixed(10)])];
    let axes = BatchAxes::infer(&declared(&inputs), &declared(&outputs), &request(&[])).unwrap();
    assert_eq!(axes.to_string(), "image=0 table=0 logits=0");
    assert!(axes.all_on_axis_0());
}

#[test]
fn unnamed_axes_need_the_flag_and_the_flag_decides() {
    // silero_vad.onnx: every dynamic axis unnamed.
    let inputs = [
        ("input", vec![Dim::Unknown, Dim::Unknown]),
        ("state", vec![fixed(2), Dim::Unknown, fixed(128)]),
        ("sr", vec![]),
    ];
    let outputs = [
        ("output", vec![Dim::Unknown, fixed(1)]),
        ("stateN", vec![Dim::Unknown, Dim::Unknown, Dim::Unknown]),
    ];
    let axes = BatchAxes::infer(&declared(&inputs), &declared(&outputs), &request(&[])).unwrap();
    assert_eq!(axes.axis("input").unwrap(), Some(0));
    let err = axes.axis("state").unwrap_err().to_string();
    assert_eq!(
        err,
        "input 'state' (2×?×128): its axis 0 is fixed and its dynamic axes carry no name the other inputs share, so its batch axis cannot be told; give it with --batch-axis state=K (or state=none when it is the same for every sample)"
    );
    let axes = BatchAxes::infer(
        &declared(&inputs),
        &declared(&outputs),
        &request(&["state=1"]),
    )
    .unwrap();
    // An output is an error only once its axis is needed.
    let err = axes.axis("stateN").unwrap_err().to_string();
    assert!(
        err.starts_with("output 'stateN' (?×?×?): its axes carry no name"),
        "{err}"
    );
    assert!(err.contains("--batch-axis stateN=K"), "{err}");
    let axes = BatchAxes::infer(
        &declared(&inputs),
        &declared(&outputs),
        &request(&["state=1", "output=0", "stateN=1"]),
    )
    .unwrap();
    assert_eq!(
        axes.to_string(),
        "input=0 state=1 sr=none output=0 stateN=1"
    );
    assert_eq!(axes.axis("sr").unwrap(), None);
}

#[test]
fn the_flag_is_checked_against_the_model() {
    let inputs = [("x", vec![sym("N"), fixed(3)])];
    let outputs = [("y", vec![sym("N")])];
    let run = |r: &[&str]| {
        BatchAxes::infer(&declared(&inputs), &declared(&outputs), &request(r))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        run(&["z=0"]),
        "--batch-axis z=…: the model has no input or output 'z' (it has: x, y)"
    );
    assert_eq!(run(&["x=2"]), "--batch-axis x=2: 'x' has rank 2 (N×3)");
    assert!("x".parse::<BatchAxisChoice>().is_err());
    assert!("x=one".parse::<BatchAxisChoice>().is_err());
    assert_eq!(
        "a:b=none".parse::<BatchAxisChoice>().unwrap(),
        BatchAxisChoice {
            name: "a:b".into(),
            axis: None
        }
    );
}

#[test]
fn the_symbol_most_inputs_share_is_the_batch() {
    // `L` is on axis 0 of the state, but `N` is carried by both inputs.
    let inputs = [
        ("state", vec![sym("L"), sym("N"), fixed(8)]),
        ("x", vec![sym("N"), fixed(16)]),
    ];
    let axes = BatchAxes::infer(&declared(&inputs), &[], &request(&[])).unwrap();
    assert_eq!(axes.to_string(), "state=1 x=0");
}
