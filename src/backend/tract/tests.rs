//! The tract backend run as the commands run it: batches split into pieces, outputs visited as
//! their nodes run, and the same values as the whole batch at once.

use super::*;
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::shape::{Batch, FixBatch};
use crate::onnx::test_models;
use crate::tensor::TensorData;

#[test]
fn runs_the_two_input_model() {
    let model = OnnxModel::from_proto(test_models::two_input(None), "two.onnx");
    let mut b = TractBackend::load(
        &model,
        &TractOptions {
            batch: Some(2),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(b.inputs().len(), 2);
    assert_eq!(b.inputs()[0].dims, vec![Dim::Fixed(2), Dim::Fixed(4)]);
    let a = HostTensor::new(
        "a",
        vec![2, 4],
        TensorData::F32(vec![1.0, -2.0, 3.0, -4.0, 0.5, 0.5, 0.5, 0.5]),
    )
    .unwrap();
    let bb = HostTensor::new("b", vec![2, 4], TensorData::F32(vec![1.0; 8])).unwrap();
    let out = b.run(&[a, bb]).unwrap();
    assert_eq!(out.outputs[0].name, "sum");
    assert_eq!(
        out.outputs[0].data,
        TensorData::F32(vec![2.0, 0.0, 4.0, 0.0, 1.5, 1.5, 1.5, 1.5])
    );
    assert_eq!(
        out.outputs[1].data,
        TensorData::F32(vec![1.0, -2.0, 3.0, -4.0, 0.5, 0.5, 0.5, 0.5])
    );
}

/// Visits the float outputs of one run of `b` on `inputs`, each piece's values as seen.
fn visited(b: &mut TractBackend, inputs: &[HostTensor]) -> Vec<(usize, Vec<f32>)> {
    let seen = std::sync::Mutex::new(Vec::new());
    b.run_visit(inputs, &|i, values| {
        seen.lock().unwrap().push((i, values.to_vec()));
        Ok(())
    })
    .unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort_by(|x, y| x.partial_cmp(y).unwrap());
    seen
}

/// Sorted values of output `i` of `run`.
fn sorted_output(out: &RunOutput, i: usize) -> Vec<f32> {
    let TensorData::F32(mut v) = out.outputs[i].data.clone() else {
        panic!("float output expected");
    };
    v.sort_by(f32::total_cmp);
    v
}

/// The test classifier with its `flat` tensor exposed as output 1, after the logits.
fn classifier_capturing_flat() -> OnnxModel {
    let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
    let capture = crate::onnx::rewrite::capture::Capture {
        names: vec!["flat".into()],
    };
    capture.run(m).unwrap().0
}

/// A batch of 2 for the test classifier, seeded.
fn classifier_batch_of_2(seed: u64) -> HostTensor {
    let values = test_models::deterministic_weights(seed, 1536, 1.0);
    HostTensor::new("input", vec![2, 3, 16, 16], TensorData::F32(values)).unwrap()
}

/// On the CPU an output is visited as soon as its node has run: the classifier's `flat`
/// (exposed as output 1, after the logits) is visited before the logits in every piece,
/// and each visit holds what `run` returns.
#[test]
fn outputs_are_visited_as_their_nodes_run() {
    let cap = classifier_capturing_flat();
    let mut b = TractBackend::load(
        &cap,
        &TractOptions {
            batch: Some(2),
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((b.threads.chunks, b.threads.workers), (2, 1));
    let x = classifier_batch_of_2(2);
    let expected = b.run(std::slice::from_ref(&x)).unwrap();
    let order = std::sync::Mutex::new(Vec::new());
    b.run_visit(std::slice::from_ref(&x), &|i, values| {
        order.lock().unwrap().push((i, values.to_vec()));
        Ok(())
    })
    .unwrap();
    let order = order.into_inner().unwrap();
    assert_eq!(
        order.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        [1, 0, 1, 0],
        "per piece: flat, then the logits"
    );
    for i in 0..2 {
        let mut got: Vec<f32> = order
            .iter()
            .filter(|(j, _)| *j == i)
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        got.sort_by(f32::total_cmp);
        assert_eq!(got, sorted_output(&expected, i));
    }
}

/// With the captured `flat` visit-only, a run returns the logits alone, and a visit still
/// sees both outputs with the values the model computes.
#[test]
fn visit_only_outputs_are_visited_and_not_returned() {
    let cap = classifier_capturing_flat();
    let open = |visit_only_from| {
        TractBackend::load(
            &cap,
            &TractOptions {
                batch: Some(2),
                visit_only_from,
                ..Default::default()
            },
        )
        .unwrap()
    };
    let x = classifier_batch_of_2(3);
    let inputs = std::slice::from_ref(&x);
    let mut all = open(None);
    let mut only = open(Some(1));
    assert_eq!(
        only.outputs().len(),
        2,
        "outputs() still lists the visit-only one"
    );
    let returned = only.run(inputs).unwrap();
    let names: Vec<&str> = returned.outputs.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["logits"]);
    assert_eq!(returned.outputs[0].shape[0], 2);
    assert_eq!(
        sorted_output(&returned, 0),
        sorted_output(&all.run(inputs).unwrap(), 0)
    );
    assert_eq!(visited(&mut only, inputs), visited(&mut all, inputs));
}

/// Visiting a chunked run sees exactly the values `run` returns: every real sample once,
/// none of the last chunk's padding.
#[test]
fn visiting_a_chunked_run_sees_the_outputs_once() {
    let model = OnnxModel::from_proto(test_models::two_input(None), "two.onnx");
    let mut b = TractBackend::load(
        &model,
        &TractOptions {
            batch: Some(5),
            threads: Some(2),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        (b.threads.chunks, b.threads.chunk_batch),
        (2, 3),
        "batch 5 on 2 threads, no convolution: chunks of 3, one padded"
    );
    let values = test_models::deterministic_weights(4, 20, 1.0);
    let a = HostTensor::new("a", vec![5, 4], TensorData::F32(values)).unwrap();
    let ones = HostTensor::new("b", vec![5, 4], TensorData::F32(vec![1.0; 20])).unwrap();
    let inputs = [a, ones];
    let expected = b.run(&inputs).unwrap();
    let seen = visited(&mut b, &inputs);
    for output in 0..2 {
        let pieces: Vec<&Vec<f32>> = seen
            .iter()
            .filter(|(i, _)| *i == output)
            .map(|(_, v)| v)
            .collect();
        let mut sizes: Vec<usize> = pieces.iter().map(|v| v.len()).collect();
        sizes.sort();
        assert_eq!(
            sizes,
            vec![8, 12],
            "output {output}: 3 samples and 2 real ones"
        );
        let mut got: Vec<f32> = pieces.into_iter().flatten().copied().collect();
        got.sort_by(f32::total_cmp);
        assert_eq!(got, sorted_output(&expected, output));
    }
}

/// A convolutional model runs its batch one sample a piece, on one thread too, and gives
/// the same logits as the whole batch at once.
#[test]
fn a_convolutional_batch_runs_per_sample_with_the_same_logits() {
    let model = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
    let open = |threads| {
        TractBackend::load(
            &model,
            &TractOptions {
                batch: Some(3),
                threads: Some(threads),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let mut b = open(1);
    assert_eq!((b.threads.chunks, b.threads.chunk_batch), (3, 1));
    let x = HostTensor::new(
        "input",
        vec![3, 3, 16, 16],
        TensorData::F32(test_models::deterministic_weights(9, 3 * 768, 1.0)),
    )
    .unwrap();
    let pieces = b.run(std::slice::from_ref(&x)).unwrap();
    let seen = visited(&mut open(2), std::slice::from_ref(&x));
    assert_eq!(seen.len(), 3, "three pieces of one sample");
    assert!(seen.iter().all(|(i, v)| *i == 0 && v.len() == 10));
    let whole_model = FixBatch::new(Batch::Static(3))
        .run(model.clone())
        .unwrap()
        .0;
    let mut whole = open_whole(&whole_model);
    let reference = whole.run(std::slice::from_ref(&x)).unwrap();
    let (TensorData::F32(p), TensorData::F32(r)) =
        (&pieces.outputs[0].data, &reference.outputs[0].data)
    else {
        panic!("float logits expected");
    };
    assert_eq!(pieces.outputs[0].shape, vec![3, 10]);
    for (p, r) in p.iter().zip(r) {
        assert!((p - r).abs() <= 1e-4 * r.abs().max(1.0), "{p} vs {r}");
    }
}

/// More threads than pieces: each piece runs on tract's multithreaded executor inside a
/// plain worker thread; every piece runs, many times over, and agrees with one thread. (The
/// rayon-pool workers this replaced aborted with "RefCell already borrowed" on the 16-core
/// machine with real models; this tiny model does not reproduce that here.)
#[test]
fn pieces_on_multithreaded_executors_run_side_by_side() {
    let model = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
    let open = |threads| {
        TractBackend::load(
            &model,
            &TractOptions {
                batch: Some(8),
                threads: Some(threads),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let mut b = open(32);
    assert_eq!(
        (b.threads.chunks, b.threads.workers, b.threads.intra),
        (8, 8, 4)
    );
    let x = HostTensor::new(
        "input",
        vec![8, 3, 16, 16],
        TensorData::F32(test_models::deterministic_weights(5, 8 * 768, 1.0)),
    )
    .unwrap();
    let one = open(1).run(std::slice::from_ref(&x)).unwrap();
    for _ in 0..30 {
        let out = b.run(std::slice::from_ref(&x)).unwrap();
        assert_eq!(out.outputs[0].shape, vec![8, 10]);
        assert_eq!(sorted_output(&out, 0), sorted_output(&one, 0));
        assert_eq!(visited(&mut b, std::slice::from_ref(&x)).len(), 8);
    }
}

/// A model with a fixed batch runs as one piece, whatever its convolutions.
fn open_whole(model: &OnnxModel) -> TractBackend {
    let b = TractBackend::load(model, &TractOptions::default()).unwrap();
    assert_eq!(b.threads.chunks, 1);
    b
}

#[test]
fn runs_the_classifier_at_batch_3() {
    let model = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
    let mut b = TractBackend::load(
        &model,
        &TractOptions {
            batch: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    let x = HostTensor::new(
        "input",
        vec![3, 3, 16, 16],
        TensorData::F32(test_models::deterministic_weights(9, 3 * 768, 1.0)),
    )
    .unwrap();
    let out = b.run(&[x]).unwrap();
    assert_eq!(out.outputs[0].shape, vec![3, 10]);
}

/// An input axis with neither a size nor a name (a Paddle export's `?` height and width): tract
/// cannot analyse the model, and the error names the axis to size, as ONNX Runtime's does;
/// sized, the model opens.
#[test]
fn an_unnamed_free_input_axis_is_an_axis_to_size() {
    let proto = test_models::paddle_style(Dim::Symbol("N".into()), Dim::Unknown, Dim::Unknown);
    let model = OnnxModel::from_proto(proto, "p.onnx");
    let options = |shapes: &[&str]| TractOptions {
        batch: Some(1),
        input_shapes: ShapeRequest::shapes(
            crate::onnx::shape::parse_input_shapes(
                &shapes.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
            .unwrap(),
        ),
        ..Default::default()
    };
    let err = TractBackend::load(&model, &options(&[])).err().unwrap();
    assert_eq!(crate::error::kind_of(&err), Some(ErrorKind::UnfixedAxis));
    assert_eq!(
        err.to_string(),
        "tensor 'x': axis 2 is '?', which is not fixed"
    );
    let hint = crate::error::hint_of(&err).cloned();
    let Some(crate::error::Hint::SizeAxis(free)) = hint else {
        panic!("no axis to size: {hint:?}");
    };
    assert_eq!(
        free.shape,
        [None, Some(3), None, None],
        "the batch shown free"
    );
    assert!(TractBackend::load(&model, &options(&["x:-1x3x16x16"])).is_ok());
}
