//! `trtkit validate` against segmentation masks (mIoU, pixel accuracy) and COCO annotations
//! (mAP): planted mistakes give the figures worked out by hand, boxes are mapped back through
//! the resize and crop to the image's own pixels, and bad ground truth is named.

mod support;

use support::{assert_clean_error, save, stdout_of_success, trtkit, trtkit_in};
use trtkit::onnx::graph_builder::{attr_int, attr_ints, tensor_f32, tensor_i64, GraphBuilder};
use trtkit::onnx::pb::tensor_proto::DataType;
use trtkit::onnx::pb::ModelProto;
use trtkit::tensor::Dim;

/// Writes an 8-bit PNG: `channels` 1 (gray) or 3 (RGB).
fn write_png(path: &std::path::Path, w: u32, h: u32, channels: usize, data: &[u8]) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut enc = png::Encoder::new(file, w, h);
    enc.set_color(if channels == 1 {
        png::ColorType::Grayscale
    } else {
        png::ColorType::Rgb
    });
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header().unwrap().write_image_data(data).unwrap();
}

/// A segmenter whose class at each pixel is its brightest colour channel (red 0, green 1,
/// blue 2): an identity 1×1 convolution, `input` [N,3,32,32] → `out` [N,3,32,32].
fn colour_segmenter() -> ModelProto {
    let n = Dim::Symbol("batch".into());
    let fixed = |v| Dim::Fixed(v);
    let mut g = GraphBuilder::new("colour_segmenter");
    let shape = [n, fixed(3), fixed(32), fixed(32)];
    g.input("input", DataType::Float, &shape)
        .output("out", DataType::Float, &shape)
        .initializer(tensor_f32(
            "eye",
            &[3, 3, 1, 1],
            &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        ))
        .node(
            "Conv",
            &["input", "eye"],
            &["out"],
            vec![attr_ints("kernel_shape", &[1, 1])],
        );
    g.build()
}

const PLAIN: [&str; 8] = [
    "--resize", "0", "--crop", "32", "--mean", "0,0,0", "--std", "1,1,1",
];

/// Two 32×32 images with their masks under `dir`: image a, left half red (class 0) and right
/// half green (1); image b, blue (2) with a red 8×8 square at the top left. Mask a leaves rows
/// 0–1 of the red half out (255, 32 pixels) and calls an 8×4 block of the green half (rows
/// 10–17, columns 16–19) red: 32 pixels the model gets "wrong". Mask b is exact.
fn colour_dataset(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (images, masks) = (dir.join("images"), dir.join("masks"));
    std::fs::create_dir_all(&images).unwrap();
    std::fs::create_dir_all(&masks).unwrap();
    let colour = |class: u8| match class {
        0 => [255, 0, 0],
        1 => [0, 255, 0],
        _ => [0, 0, 255],
    };
    let a_truth: Vec<u8> = (0..1024).map(|p| u8::from(p % 32 >= 16)).collect();
    let b_truth: Vec<u8> = (0..1024)
        .map(|p| if p % 32 < 8 && p / 32 < 8 { 0 } else { 2 })
        .collect();
    for (name, truth) in [("a", &a_truth), ("b", &b_truth)] {
        let rgb: Vec<u8> = truth.iter().flat_map(|&c| colour(c)).collect();
        write_png(&images.join(format!("{name}.png")), 32, 32, 3, &rgb);
    }
    let mut a_mask = a_truth.clone();
    for (p, label) in a_mask.iter_mut().enumerate() {
        let (y, x) = (p / 32, p % 32);
        if y < 2 && x < 16 {
            *label = 255;
        }
        if (10..18).contains(&y) && (16..20).contains(&x) {
            *label = 0;
        }
    }
    write_png(&masks.join("a.png"), 32, 32, 1, &a_mask);
    write_png(&masks.join("b.png"), 32, 32, 1, &b_truth);
    (images, masks)
}

/// The mIoU of [`colour_segmenter`] on [`colour_dataset`]: class 0 has 480 + 64 pixels right
/// and 32 missed (544 / 576); class 1 has 480 right and 32 extra (480 / 512); class 2 is exact.
const COLOUR_MIOU: f64 = (544.0 / 576.0 + 480.0 / 512.0 + 1.0) / 3.0;

#[test]
fn masks_give_the_miou_and_pixel_accuracy_worked_out_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "seg.onnx", colour_segmenter());
    let (images, masks) = colour_dataset(dir.path());
    let mut args = vec![
        "validate",
        model.to_str().unwrap(),
        "--dataset",
        images.to_str().unwrap(),
        "--masks",
        masks.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(&PLAIN);
    let v: serde_json::Value = serde_json::from_str(&stdout_of_success(&trtkit(&args))).unwrap();
    let s = &v["segment"];
    // 2048 pixels, 32 left out; 32 of the 2016 counted disagree.
    assert_eq!(
        (s["pixels"].as_u64(), s["ignored"].as_u64()),
        (Some(2016), Some(32))
    );
    assert_eq!(s["pixel_accuracy"].as_f64().unwrap(), 1984.0 / 2016.0);
    let iou: Vec<f64> = s["class_iou"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(iou, [544.0 / 576.0, 480.0 / 512.0, 1.0]);
    let miou = s["miou"].as_f64().unwrap();
    assert!((miou - COLOUR_MIOU).abs() < 1e-12);
    args.retain(|a| *a != "--json");
    let text = String::from_utf8_lossy(&trtkit(&args).stdout).to_string();
    assert!(text.contains("mIoU") && text.contains("98.41%"), "{text}");
    // A mask that is missing, or in colour, is named.
    std::fs::remove_file(masks.join("b.png")).unwrap();
    assert_clean_error(&trtkit(&args), 1, &["b.png", "no mask for image"]);
    write_png(&masks.join("b.png"), 32, 32, 3, &vec![0; 3072]);
    assert_clean_error(&trtkit(&args), 1, &["b.png", "RGB mask"]);
}

/// A "detector" that finds the same two boxes in every image, as NMS outputs: `det_boxes`
/// [N,2,4] (corners, model pixels), `det_scores` [N,2], `det_classes` [N,2].
fn fixed_detector() -> ModelProto {
    let n = Dim::Symbol("batch".into());
    let fixed = |v| Dim::Fixed(v);
    let boxes = [0.0, 0.0, 16.0, 16.0, 16.0, 8.0, 32.0, 24.0];
    let mut g = GraphBuilder::new("fixed_detector");
    g.input(
        "images",
        DataType::Float,
        &[n.clone(), fixed(3), fixed(32), fixed(32)],
    )
    .output(
        "det_boxes",
        DataType::Float,
        &[n.clone(), fixed(2), fixed(4)],
    )
    .output("det_scores", DataType::Float, &[n.clone(), fixed(2)])
    .output("det_classes", DataType::Float, &[n, fixed(2)])
    .initializer(tensor_f32("zero8", &[3, 8], &[0.0; 24]))
    .initializer(tensor_f32("zero2", &[3, 2], &[0.0; 6]))
    .initializer(tensor_f32("boxes", &[8], &boxes))
    .initializer(tensor_f32("scores", &[2], &[0.9, 0.8]))
    .initializer(tensor_f32("classes", &[2], &[0.0, 1.0]))
    .initializer(tensor_i64("box_shape", &[3], &[0, 2, 4]))
    .node("GlobalAveragePool", &["images"], &["pooled"], vec![])
    .node("Flatten", &["pooled"], &["flat"], vec![attr_int("axis", 1)])
    .node("MatMul", &["flat", "zero8"], &["z8"], vec![])
    .node("MatMul", &["flat", "zero2"], &["z2"], vec![])
    .node("Add", &["z8", "boxes"], &["box_rows"], vec![])
    .node(
        "Reshape",
        &["box_rows", "box_shape"],
        &["det_boxes"],
        vec![],
    )
    .node("Add", &["z2", "scores"], &["det_scores"], vec![])
    .node("Add", &["z2", "classes"], &["det_classes"], vec![]);
    g.build()
}

#[test]
fn coco_boxes_are_mapped_back_to_the_image_and_scored_as_coco_does() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "det.onnx", fixed_detector());
    let images = dir.path().join("images");
    std::fs::create_dir_all(&images).unwrap();
    for name in ["a.png", "b.png"] {
        write_png(&images.join(name), 64, 48, 3, &vec![128; 64 * 48 * 3]);
    }
    // 64×48 → shorter side 32: 42×32, crop 32 from x = 5. Model box (x1, y1, x2, y2) is
    // ((x1 + 5) · 64/42, y1 · 1.5, (x2 + 5) · 64/42, y2 · 1.5) in the image.
    let sx = 64.0 / 42.0;
    let first = [5.0 * sx, 0.0, 16.0 * sx, 24.0]; // [x, y, w, h]
    let second = [21.0 * sx, 12.0, 16.0 * sx, 24.0];
    // Image a has both boxes; image b the first and a second box of class 0 that the model
    // misses (and the model's class-1 box on b is a false positive).
    let annotations = serde_json::json!({
        "images": [
            {"id": 1, "file_name": "a.png", "width": 64, "height": 48},
            {"id": 2, "file_name": "b.png", "width": 64, "height": 48}
        ],
        "annotations": [
            {"image_id": 1, "category_id": 1, "bbox": first},
            {"image_id": 1, "category_id": 3, "bbox": second},
            {"image_id": 2, "category_id": 1, "bbox": first},
            {"image_id": 2, "category_id": 1, "bbox": [40.0, 30.0, 10.0, 10.0]}
        ],
        "categories": [{"id": 3, "name": "b"}, {"id": 1, "name": "a"}]
    });
    let file = dir.path().join("instances.json");
    std::fs::write(&file, annotations.to_string()).unwrap();
    let args = [
        "validate",
        model.to_str().unwrap(),
        "--dataset",
        images.to_str().unwrap(),
        "--coco",
        file.to_str().unwrap(),
        "--resize",
        "32",
        "--json",
    ];
    let v: serde_json::Value = serde_json::from_str(&stdout_of_success(&trtkit(&args))).unwrap();
    let d = &v["detect"];
    // Class 0: 3 ground truths, 2 found at every IoU threshold → precision 1 up to recall
    // 2/3: 67 of the 101 recall points. Class 1: 1 found first, then a false positive → 1.
    let expected = (67.0 / 101.0 + 1.0) / 2.0;
    for key in ["map50", "map75", "map50_95"] {
        let got = d[key].as_f64().unwrap();
        assert!((got - expected).abs() < 1e-9, "{key}: {got} vs {expected}");
    }
    assert_eq!(
        (d["ground_truths"].as_u64(), d["detections"].as_u64()),
        (Some(4), Some(4))
    );
    // Without the resize the crop is taken from the 64×48 image as it is: the boxes land
    // elsewhere and the mAP falls.
    let mut unresized = args.to_vec();
    unresized[7] = "0";
    let out = trtkit(&unresized);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["detect"]["map50"].as_f64().unwrap() < 0.5, "{v}");
    // An annotation naming an image the file does not list is refused, naming the file.
    let mut bad = annotations.clone();
    bad["annotations"][0]["image_id"] = 9.into();
    std::fs::write(&file, bad.to_string()).unwrap();
    assert_clean_error(&trtkit(&args), 1, &["instances.json", "image id 9"]);
}

#[test]
fn a_bench_with_masks_records_the_miou_and_the_report_plots_it() {
    let dir = tempfile::tempdir().unwrap();
    save(dir.path(), "seg.onnx", colour_segmenter());
    colour_dataset(dir.path());
    let mut args = vec![
        "bench",
        "--models",
        "seg.onnx",
        "--precisions",
        "fp32",
        "--batch-sizes",
        "2",
        "--targets",
        "tract-cpu",
        "--dataset",
        "images",
        "--masks",
        "masks",
        "--warmup",
        "1",
        "--iterations",
        "2",
        "--name",
        "seg",
    ];
    args.extend_from_slice(&PLAIN);
    let out = trtkit_in(dir.path(), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let journal = std::fs::read_to_string(dir.path().join("results/seg/journal.jsonl")).unwrap();
    let record: serde_json::Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
    let accuracy = &record["metrics"]["accuracy"];
    let miou = accuracy["miou_pct"].as_f64().unwrap();
    assert!((miou - 100.0 * COLOUR_MIOU).abs() < 1e-9, "{accuracy}");
    let md = trtkit_in(dir.path(), &["report", "results/seg", "--markdown"]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("mIoU %") && !md.contains("top-1 %"), "{md}");
}

#[test]
fn a_segmentation_workspace_has_miou_columns_and_a_task_table_per_precision() {
    let dir = tempfile::tempdir().unwrap();
    save(dir.path(), "seg.onnx", colour_segmenter());
    let ws = dir.path().join("ws");
    colour_dataset(&ws);
    let mut init = vec![
        "init",
        "../seg.onnx",
        "--dataset",
        "images",
        "--masks",
        "masks",
    ];
    init.extend_from_slice(&PLAIN[..2]);
    init.extend_from_slice(&PLAIN[4..]);
    stdout_of_success(&trtkit_in(&ws, &init));
    stdout_of_success(&trtkit_in(
        &ws,
        &["build", "--fp16", "--input-shape", "-1", "3", "32", "32"],
    ));
    // The model and the FP16 build's kept graph (the engine cannot run here) score mIoU.
    let v: serde_json::Value =
        serde_json::from_str(&stdout_of_success(&trtkit_in(&ws, &["validate", "--json"]))).unwrap();
    let scored: Vec<f64> = v["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["accuracy"]["segment"][0].as_f64())
        .collect();
    assert!(scored.len() >= 2, "{v}");
    assert!(
        scored.iter().all(|m| (m - COLOUR_MIOU).abs() < 1e-9),
        "{scored:?}"
    );
    let text = stdout_of_success(&trtkit_in(&ws, &["validate"]));
    assert!(
        text.contains("mIoU") && text.contains("Pixel acc"),
        "{text}"
    );
    // compare over the workspace's images (a flat folder beside its masks): a task row per
    // precision.
    let v: serde_json::Value = serde_json::from_str(&stdout_of_success(&trtkit_in(
        &ws,
        &["compare", "--dataset", "images", "--json"],
    )))
    .unwrap();
    let row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["task"]["segment"].is_object())
        .unwrap_or_else(|| panic!("no task row: {v}"));
    assert_eq!(row["task"]["segment"]["pixel_agreement_pct"], 100.0);
    let text = stdout_of_success(&trtkit_in(&ws, &["compare", "--dataset", "images"]));
    assert!(
        text.contains("task: segment (guessed") && text.contains("pixel agreement %"),
        "{text}"
    );
}
