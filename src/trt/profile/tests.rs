//! Tests of the engine profile: batch ranges, named-axis ranges and explicit shapes.

use super::*;
use crate::onnx::shape::parse_named_shapes;

fn input(name: &str, dims: Vec<Dim>) -> TensorInfo {
    TensorInfo::float32(name, dims)
}

fn image(batch: Dim) -> TensorInfo {
    input(
        "x",
        vec![batch, Dim::Fixed(3), Dim::Fixed(224), Dim::Fixed(224)],
    )
}

#[test]
fn a_named_axis_range_applies_to_every_input_that_carries_it() {
    let seq = |name: &str| {
        input(
            name,
            vec![Dim::Symbol("batch".into()), Dim::Symbol("seq".into())],
        )
    };
    let inputs = [seq("input_ids"), seq("attention_mask")];
    let batch = BatchRequest {
        min: Some(1),
        opt: Some(1),
        max: Some(4),
    };
    let err = resolve_profile(&inputs, &batch, &ExplicitShapes::default()).unwrap_err();
    assert!(
        err.to_string().contains("axis 1 ('seq') is dynamic"),
        "{err}"
    );
    let explicit = ExplicitShapes {
        axes: vec![AxisRange {
            symbol: "seq".into(),
            range: BatchRange {
                min: 16,
                opt: 128,
                max: 512,
            },
        }],
        ..Default::default()
    };
    assert!(explicit.is_set());
    let p = resolve_profile(&inputs, &batch, &explicit).unwrap();
    for i in &p.inputs {
        assert_eq!(
            (&i.min, &i.opt, &i.max),
            (&vec![1, 16], &vec![1, 128], &vec![4, 512])
        );
    }
    assert_eq!(p.batch_range(), None);
    assert!(p.file_tag().starts_with('p'), "{}", p.file_tag());
}

#[test]
fn batch_defaults_follow_what_was_given() {
    assert_eq!(BatchRequest::default().resolve().unwrap(), DEFAULT_BATCH);
    let r = BatchRequest {
        max: Some(8),
        ..Default::default()
    };
    assert_eq!(
        r.resolve().unwrap(),
        BatchRange {
            min: 1,
            opt: 8,
            max: 8
        }
    );
    let r = BatchRequest {
        opt: Some(128),
        ..Default::default()
    };
    assert_eq!(r.resolve().unwrap().max, 128);
    let r = BatchRequest {
        min: Some(16),
        opt: Some(4),
        max: None,
    };
    let err = r.resolve().unwrap_err().to_string();
    assert!(err.contains("min 16, opt 4"), "{err}");
    // A min above the max is said, not left to the defaults to trip over.
    let r = BatchRequest {
        min: Some(8),
        opt: None,
        max: Some(4),
    };
    let err = r.resolve().unwrap_err().to_string();
    assert!(err.contains("min 8, max 4"), "{err}");
}

#[test]
fn dynamic_batch_takes_the_range_and_names_the_file() {
    let p = resolve_profile(
        &[image(Dim::Symbol("batch".into()))],
        &BatchRequest::default(),
        &ExplicitShapes::default(),
    )
    .unwrap();
    assert_eq!(p.inputs[0].min, vec![1, 3, 224, 224]);
    assert_eq!(p.inputs[0].max, vec![64, 3, 224, 224]);
    assert_eq!(p.file_tag(), "b1_32_64");
    let s = resolve_profile(
        &[image(Dim::Fixed(32))],
        &BatchRequest::default(),
        &ExplicitShapes::default(),
    )
    .unwrap();
    assert!(s.is_static());
    assert_eq!(s.file_tag(), "b32");
}

#[test]
fn explicit_shapes_are_checked() {
    let inputs = [image(Dim::Symbol("batch".into()))];
    let shapes = |min: &str, opt: &str, max: &str| ExplicitShapes {
        min: parse_named_shapes("--min-shapes", &[min.into()]).unwrap(),
        opt: parse_named_shapes("--opt-shapes", &[opt.into()]).unwrap(),
        max: parse_named_shapes("--max-shapes", &[max.into()]).unwrap(),
        axes: vec![],
    };
    let ok = resolve_profile(
        &inputs,
        &BatchRequest::default(),
        &shapes("x:1x3x224x224", "x:8x3x224x224", "x:16x3x224x224"),
    )
    .unwrap();
    assert_eq!(ok.file_tag(), "b1_8_16");
    let err = resolve_profile(
        &inputs,
        &BatchRequest::default(),
        &shapes("x:8x3x224x224", "x:4x3x224x224", "x:16x3x224x224"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("min 8, opt 4"), "{err}");
    let err = resolve_profile(
        &inputs,
        &BatchRequest::default(),
        &shapes("x:1x3x224", "x:4x3x224", "x:16x3x224"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("rank 3") && err.contains("rank 4"), "{err}");
    let err = resolve_profile(
        &inputs,
        &BatchRequest::default(),
        &shapes("y:1x3x224x224", "x:4x3x224x224", "x:16x3x224x224"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("no input 'y'"), "{err}");
}

#[test]
fn a_dynamic_axis_beyond_the_batch_needs_a_range() {
    let seq = input(
        "ids",
        vec![Dim::Symbol("batch".into()), Dim::Symbol("seq".into())],
    );
    let err =
        resolve_profile(&[seq], &BatchRequest::default(), &ExplicitShapes::default()).unwrap_err();
    assert_eq!(
        crate::error::hint_of(&err),
        Some(&crate::error::Hint::Change(Setting::ShapeRanges))
    );
    assert!(err.to_string().contains("'seq'"), "{err}");
}

#[test]
fn a_profile_beyond_the_batch_is_named_by_hash() {
    let p = ShapeProfile {
        inputs: vec![InputProfile {
            name: "ids".into(),
            min: vec![1, 16],
            opt: vec![1, 128],
            max: vec![1, 512],
        }],
    };
    assert!(p.file_tag().starts_with('p') && p.file_tag().len() == 9);
}
