//! `trtkit compare --task detect|segment`: planted box and pixel changes give exactly the
//! expected counts, both YOLO layouts read alike, and FP16 graphs of the test detector and
//! segmenters agree with FP32 on the task's own terms.

mod support;

use support::{assert_clean_error, save, stdout_of_success, trtkit};
use trtkit::data::npz;
use trtkit::onnx::test_models::{segmenter, segmenter_3d, yolo_head, YoloStyle};
use trtkit::tensor::{HostTensor, TensorData};

/// Anchors and classes of the planted heads.
const ANCHORS: usize = 20;
const CLASSES: usize = 3;

/// A box: centre x, centre y, width, height, score, class.
type Planted = (f32, f32, f32, f32, f32, usize);

/// A `[images, ANCHORS, 5 + CLASSES]` head holding `boxes[i]` on image i (objectness 1, the
/// score on the class), every other anchor empty.
fn v5_head(boxes: &[Vec<Planted>]) -> HostTensor {
    let k = 5 + CLASSES;
    let mut data = vec![0f32; boxes.len() * ANCHORS * k];
    for (i, image) in boxes.iter().enumerate() {
        for (a, &(cx, cy, w, h, score, class)) in image.iter().enumerate() {
            let row = &mut data[(i * ANCHORS + a) * k..(i * ANCHORS + a + 1) * k];
            row[..5].copy_from_slice(&[cx, cy, w, h, 1.0]);
            row[5 + class] = score;
        }
    }
    HostTensor::new(
        "output0",
        vec![boxes.len(), ANCHORS, k],
        TensorData::F32(data),
    )
    .unwrap()
}

/// The same predictions as [`v5_head`] in the anchors-last layout, `[images, 4 + CLASSES,
/// ANCHORS]`, without objectness.
fn v8_head(boxes: &[Vec<Planted>]) -> HostTensor {
    let k = 4 + CLASSES;
    let mut data = vec![0f32; boxes.len() * ANCHORS * k];
    for (i, image) in boxes.iter().enumerate() {
        for (a, &(cx, cy, w, h, score, class)) in image.iter().enumerate() {
            let at = |c: usize| (i * k + c) * ANCHORS + a;
            for (c, v) in [cx, cy, w, h].into_iter().enumerate() {
                data[at(c)] = v;
            }
            data[at(4 + class)] = score;
        }
    }
    HostTensor::new(
        "output0",
        vec![boxes.len(), k, ANCHORS],
        TensorData::F32(data),
    )
    .unwrap()
}

fn json_of(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&stdout_of_success(&trtkit(args))).unwrap()
}

fn saved(dir: &std::path::Path, name: &str, t: HostTensor) -> String {
    let p = dir.join(name);
    npz::save(&p, &[t]).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn planted_box_changes_give_exactly_the_expected_counts() {
    let dir = tempfile::tempdir().unwrap();
    let reference = vec![
        vec![
            (20.0, 20.0, 10.0, 10.0, 0.9, 0),
            (60.0, 60.0, 20.0, 20.0, 0.8, 1),
            (100.0, 30.0, 16.0, 16.0, 0.7, 2),
        ],
        vec![(40.0, 40.0, 30.0, 12.0, 0.6, 1)],
    ];
    // A: the first box moved 2.5 px right (IoU (10 - 2.5) / (10 + 2.5) = 0.6: matched at 0.5,
    // not at 0.75) with its score 0.05 lower; the third box gone.
    let mut under_test = reference.clone();
    under_test[0][0] = (22.5, 20.0, 10.0, 10.0, 0.85, 0);
    under_test[0].truncate(2);
    let b = saved(dir.path(), "b.npz", v5_head(&reference));
    let a = saved(dir.path(), "a.npz", v5_head(&under_test));
    let same = json_of(&["compare", &b, &b, "--task", "detect", "--json"]);
    let d = &same["task"]["detect"];
    assert_eq!(d["matched_50_pct"], 100.0);
    assert_eq!(d["map50_95"], 1.0);
    assert_eq!(
        (d["only_a"].as_u64(), d["only_b"].as_u64()),
        (Some(0), Some(0))
    );
    let v = json_of(&["compare", &a, &b, "--json"]);
    let task = &v["task"];
    assert_eq!(task["task"], "detect");
    assert_eq!(task["guessed"], true, "{task}");
    let d = &task["detect"];
    assert_eq!(
        (d["boxes_a"].as_u64(), d["boxes_b"].as_u64()),
        (Some(3), Some(4))
    );
    assert_eq!(d["matched_50_pct"].as_f64().unwrap(), 75.0);
    assert_eq!(d["matched_75_pct"].as_f64().unwrap(), 50.0);
    assert_eq!(
        (d["only_a"].as_u64(), d["only_b"].as_u64()),
        (Some(0), Some(1))
    );
    let shift = d["score_shift_mean"].as_f64().unwrap();
    assert!((shift - (-0.05 / 3.0)).abs() < 1e-6, "{shift}");
    let iou = d["matched_iou_mean"].as_f64().unwrap();
    assert!((iou - (0.6 + 1.0 + 1.0) / 3.0).abs() < 1e-6, "{iou}");
    // Both layouts of the same predictions decode to the same boxes.
    let v8 = saved(dir.path(), "v8.npz", v8_head(&reference));
    let both = json_of(&["compare", &v8, &b, "--json"]);
    let d = &both["task"]["detect"];
    assert_eq!(d["matched_75_pct"], 100.0, "{d}");
    assert_eq!(d["map50_95"], 1.0);
    assert!(d["source_a"].as_str().unwrap().contains("anchors last"));
    assert!(d["source_b"].as_str().unwrap().contains("anchors first"));
    // The layout can be said instead of guessed.
    let said = json_of(&["compare", &v8, &v8, "--head", "anchors-last", "--json"]);
    assert_eq!(said["task"]["detect"]["matched_50_pct"], 100.0);
    // The terminal tables.
    let out = trtkit(&["compare", &a, &b]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("task: detect (guessed") && text.contains("matched @0.5 %"),
        "{text}"
    );
    // Thresholds outside [0, 1] and unknown tasks are usage errors.
    assert_clean_error(
        &trtkit(&["compare", &a, &b, "--conf", "1.5"]),
        2,
        &["--conf 1.5", "between 0 and 1"],
    );
    let pose = trtkit(&["compare", &a, &b, "--task", "pose"]);
    assert_eq!(pose.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&pose.stderr).contains("unknown task 'pose'"));
    // Corner boxes read as centre-size give other boxes.
    let xyxy = json_of(&["compare", &a, &b, "--boxes", "xyxy", "--json"]);
    assert!(xyxy["task"]["detect"]["source_a"]
        .as_str()
        .unwrap()
        .contains("xyxy"));
}

#[test]
fn nms_outputs_are_read_by_name_up_to_their_count() {
    let dir = tempfile::tempdir().unwrap();
    let tensors = |shift: f32| {
        vec![
            HostTensor::new("num_dets", vec![1, 1], TensorData::I32(vec![2])).unwrap(),
            HostTensor::new(
                "det_boxes",
                vec![1, 3, 4],
                TensorData::F32(vec![
                    0.0,
                    0.0,
                    10.0,
                    10.0,
                    20.0 + shift,
                    20.0,
                    40.0 + shift,
                    40.0,
                    0.0,
                    0.0,
                    5.0,
                    5.0,
                ]),
            )
            .unwrap(),
            HostTensor::new(
                "det_scores",
                vec![1, 3],
                TensorData::F32(vec![0.9, 0.8, 0.7]),
            )
            .unwrap(),
            HostTensor::new("det_classes", vec![1, 3], TensorData::I32(vec![0, 1, 1])).unwrap(),
        ]
    };
    let (a, b) = (dir.path().join("a.npz"), dir.path().join("b.npz"));
    npz::save(&a, &tensors(20.0)).unwrap();
    npz::save(&b, &tensors(0.0)).unwrap();
    let v = json_of(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    let d = &v["task"]["detect"];
    // The third row is past the count of 2; the second box moved off its place.
    assert_eq!(
        (d["boxes_a"].as_u64(), d["boxes_b"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(d["matched_50_pct"], 50.0);
    assert!(d["source_b"].as_str().unwrap().contains("count 'num_dets'"));
}

/// `[samples, classes, H, W]` logits whose argmax is `labels`.
fn logits_of(labels: &[usize], samples: usize, classes: usize, hw: usize) -> HostTensor {
    let mut data = vec![0f32; samples * classes * hw];
    for (p, &c) in labels.iter().enumerate() {
        let (s, pixel) = (p / hw, p % hw);
        data[(s * classes + c) * hw + pixel] = 1.0;
    }
    let side = (hw as f64).sqrt() as usize;
    HostTensor::new(
        "out",
        vec![samples, classes, side, side],
        TensorData::F32(data),
    )
    .unwrap()
}

#[test]
fn a_planted_class_swap_gives_its_pixel_share_and_iou() {
    let dir = tempfile::tempdir().unwrap();
    // Two 16×16 samples: left half class 0, right half class 1; in A a 4×8 block of class 1
    // (32 pixels of sample 0) became class 2.
    let (samples, classes, side) = (2, 3, 16);
    let b_labels: Vec<usize> = (0..samples * side * side)
        .map(|p| usize::from(p % side >= 8))
        .collect();
    let mut a_labels = b_labels.clone();
    for y in 0..8 {
        for x in 8..12 {
            a_labels[y * side + x] = 2;
        }
    }
    let b = saved(
        dir.path(),
        "b.npz",
        logits_of(&b_labels, samples, classes, 256),
    );
    let a = saved(
        dir.path(),
        "a.npz",
        logits_of(&a_labels, samples, classes, 256),
    );
    let v = json_of(&["compare", &a, &b, "--json"]);
    let s = &v["task"]["segment"];
    assert_eq!(v["task"]["task"], "segment");
    // 32 of 512 pixels changed.
    assert_eq!(
        s["pixel_agreement_pct"].as_f64().unwrap(),
        100.0 * 480.0 / 512.0
    );
    // Class 1: B has 256 pixels, A 224 of them → IoU 224/256; class 0 untouched; class 2 only
    // in A → IoU 0.
    let iou: Vec<Option<f64>> = s["class_iou"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64())
        .collect();
    assert_eq!(iou, [Some(1.0), Some(224.0 / 256.0), Some(0.0)]);
    let miou = s["miou"].as_f64().unwrap();
    assert!((miou - (1.0 + 224.0 / 256.0) / 3.0).abs() < 1e-12, "{miou}");
    assert_eq!(s["most_changed"][0]["changed"], 32);
    let same = json_of(&["compare", &b, &b, "--task", "segment", "--json"]);
    assert_eq!(same["task"]["segment"]["pixel_agreement_pct"], 100.0);
    assert_eq!(same["task"]["segment"]["miou"], 1.0);
    // A task that the outputs cannot serve is refused, naming what is missing.
    let out = trtkit(&["compare", &a, &b, "--task", "detect"]);
    assert_clean_error(&out, 1, &["no output reads as detections"]);
}

/// The FP32 model, its FP16 graph, and the task comparison of the two as JSON.
fn fp16_against_fp32(
    dir: &std::path::Path,
    name: &str,
    model: trtkit::onnx::pb::ModelProto,
    extra: &[&str],
) -> serde_json::Value {
    let fp32 = save(dir, &format!("{name}.onnx"), model);
    let fp16 = dir.join(format!("{name}-fp16.onnx"));
    let out = trtkit(&[
        "quantize",
        fp32.to_str().unwrap(),
        "--fp16",
        "-o",
        fp16.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // ONNX Runtime runs the FP16 graph in float16 where it has kernels (tract's CPU runtime
    // would take far longer).
    let mut args = vec![
        "compare",
        fp16.to_str().unwrap(),
        fp32.to_str().unwrap(),
        "--backend",
        "ort",
        "--json",
    ];
    args.extend_from_slice(extra);
    json_of(&args)
}

#[test]
fn fp16_graphs_of_the_task_models_agree_on_their_tasks() {
    let dir = tempfile::tempdir().unwrap();
    for style in [YoloStyle::V5, YoloStyle::V8] {
        let v = fp16_against_fp32(
            dir.path(),
            &format!("yolo-{style:?}"),
            yolo_head(style, 128, 20, None),
            &["--num-samples", "8"],
        );
        let d = &v["task"]["detect"];
        assert_eq!(v["task"]["task"], "detect", "{v}");
        assert!(d["boxes_b"].as_u64().unwrap() >= 8, "{d}");
        assert!(d["matched_50_pct"].as_f64().unwrap() >= 99.0, "{d}");
        // Counted strictly at --conf, the boxes whose score only crossed it are lost boxes.
        let strict = fp16_against_fp32(
            dir.path(),
            &format!("yolo-{style:?}-strict"),
            yolo_head(style, 128, 20, None),
            &["--num-samples", "8", "--score-tolerance", "0"],
        );
        let s = &strict["task"]["detect"];
        let lost =
            |d: &serde_json::Value| d["only_a"].as_u64().unwrap() + d["only_b"].as_u64().unwrap();
        assert!(lost(s) >= lost(d), "{s}");
    }
    let seg = fp16_against_fp32(
        dir.path(),
        "seg",
        segmenter(21, 64, None),
        &["--num-samples", "8"],
    );
    assert_eq!(seg["task"]["task"], "segment");
    assert!(
        seg["task"]["segment"]["pixel_agreement_pct"]
            .as_f64()
            .unwrap()
            >= 99.0,
        "{seg}"
    );
    let vol = fp16_against_fp32(
        dir.path(),
        "vol",
        segmenter_3d(3, 16, None),
        &["--num-samples", "2"],
    );
    let s = &vol["task"]["segment"];
    assert_eq!(s["pixels"], 2 * 16 * 16 * 16);
    assert!(s["pixel_agreement_pct"].as_f64().unwrap() >= 99.0, "{s}");
}

#[test]
fn no_boxes_on_either_side_is_said_with_why_instead_of_a_table_of_dashes() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(
        dir.path(),
        "yolo.onnx",
        yolo_head(YoloStyle::V8, 64, 3, None),
    );
    let model = model.to_str().unwrap();
    let args = [
        "compare",
        model,
        model,
        "--num-samples",
        "2",
        "--conf",
        "0.999",
    ];
    let r = json_of(&[&args[..], &["--json"]].concat());
    let d = &r["task"]["detect"];
    assert_eq!(
        (d["boxes_a"].as_u64(), d["boxes_b"].as_u64()),
        (Some(0), Some(0))
    );
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("random inputs rarely make detections") && notes.contains("--dataset"),
        "{notes}"
    );
    let text = stdout_of_success(&trtkit(&args));
    assert!(
        text.contains("no boxes on either side in 2 images"),
        "{text}"
    );
    assert!(!text.contains("matched @0.5 %"), "{text}");

    // Saved outputs with no box: the note does not blame random inputs.
    let empty = saved(dir.path(), "empty.npz", v8_head(&[vec![], vec![]]));
    let r = json_of(&["compare", &empty, &empty, "--json"]);
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("lower --conf") && !notes.contains("random"),
        "{notes}"
    );
}
