//! `trtkit validate` end to end: a model whose answers are known (logits = normalized mean
//! colour per channel, plus fixed biases for extra classes) on a generated labelled dataset.

mod support;

use std::path::Path;
use support::{assert_clean_error, save, trtkit, write_jpeg};
use trtkit::onnx::graph_builder::{attr_int, tensor_f32, GraphBuilder};
use trtkit::onnx::pb::tensor_proto::DataType;
use trtkit::onnx::pb::ModelProto;
use trtkit::tensor::Dim;

const CLASSES: usize = 8;

/// `input` [N,3,32,32] → GlobalAveragePool → Flatten → Gemm → `logits` [N,8]. Classes 0-2 are
/// the R, G, B channel means; classes 3-7 are constants 3:-1, 4:-2, 5:-50, 6:-3, 7:-4.
fn colour_model() -> ModelProto {
    let mut w = vec![0f32; 3 * CLASSES];
    for c in 0..3 {
        w[c * CLASSES + c] = 1.0;
    }
    let bias = [0.0, 0.0, 0.0, -1.0, -2.0, -50.0, -3.0, -4.0];
    let n = Dim::Symbol("batch".into());
    let mut g = GraphBuilder::new("colour");
    g.input(
        "input",
        DataType::Float,
        &[n.clone(), Dim::Fixed(3), Dim::Fixed(32), Dim::Fixed(32)],
    )
    .output("logits", DataType::Float, &[n, Dim::Fixed(CLASSES as i64)])
    .initializer(tensor_f32("w", &[3, CLASSES as i64], &w))
    .initializer(tensor_f32("b", &[CLASSES as i64], &bias))
    .node("GlobalAveragePool", &["input"], &["pooled"], vec![])
    .node("Flatten", &["pooled"], &["flat"], vec![attr_int("axis", 1)])
    .node("Gemm", &["flat", "w", "b"], &["logits"], vec![]);
    g.build()
}

/// A noisy solid colour: `rgb` ± 20 per sample, deterministic.
fn write_png(path: &Path, w: usize, h: usize, color: png::ColorType, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w as u32, h as u32);
    enc.set_color(color);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header().unwrap().write_image_data(data).unwrap();
}

const RED: [u8; 3] = [200, 30, 30];
const GREEN: [u8; 3] = [30, 200, 30];
const BLUE: [u8; 3] = [30, 30, 200];

/// The dataset: 17 classifiable images, 14 top-1 hits, 16 top-5 hits, and one broken file; and
/// its class map (`classes.txt` beside it), which the empty class folders need.
fn make_dataset(root: &Path) -> String {
    for i in 0..4u64 {
        write_jpeg(
            &root.join(format!("0_red/r{i}.jpg")),
            48 + 8 * i as usize,
            40,
            RED,
            i,
        );
        write_jpeg(
            &root.join(format!("1_green/g{i}.jpg")),
            40,
            60,
            GREEN,
            10 + i,
        );
        write_jpeg(
            &root.join(format!("2_blue/b{i}.JPEG")),
            64,
            64,
            BLUE,
            20 + i,
        );
    }
    // A red RGBA PNG (alpha dropped) in its class: correct.
    let rgba: Vec<u8> = (0..50 * 50).flat_map(|_| [210u8, 20, 40, 7]).collect();
    write_png(
        &root.join("0_red/r4.png"),
        50,
        50,
        png::ColorType::Rgba,
        &rgba,
    );
    // Two red images filed as green: wrong at top-1, but class 1 is in their top-5.
    write_jpeg(&root.join("1_green/mislabelled_a.jpg"), 40, 40, RED, 30);
    write_jpeg(&root.join("1_green/mislabelled_b.jpg"), 40, 40, RED, 31);
    // Mid-gray PNG: after ImageNet normalization blue is largest, so class 2: correct.
    write_png(
        &root.join("2_blue/gray.png"),
        36,
        36,
        png::ColorType::Grayscale,
        &[128; 36 * 36],
    );
    // A corrupt file: skipped and reported.
    std::fs::write(
        root.join("2_blue/broken.jpg"),
        b"\xFF\xD8\xFF\xE0 not really",
    )
    .unwrap();
    // Classes 3 and 4 have no images; class 5 holds a red image, which misses even top-5.
    std::fs::create_dir_all(root.join("3_a")).unwrap();
    std::fs::create_dir_all(root.join("4_b")).unwrap();
    write_jpeg(&root.join("5_purple/p0.jpg"), 40, 40, RED, 40);
    let map = root.with_file_name("classes.txt");
    std::fs::write(&map, "0_red\n1_green\n2_blue\n3_a\n4_b\n5_purple\n").unwrap();
    map.to_str().unwrap().to_string()
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn validate_reports_the_known_accuracy() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let data = d.path().join("val");
    let map = make_dataset(&data);
    let preds = d.path().join("out/preds.csv");
    let m = model.to_str().unwrap();
    let ds = data.to_str().unwrap();
    let out = trtkit(&[
        "validate",
        m,
        "--dataset",
        ds,
        "--class-map",
        &map,
        "--batch-size",
        "4",
        "--json",
        "--save-predictions",
        preds.to_str().unwrap(),
    ]);
    let r = json_of(&out);
    assert_eq!(r["images"], 17);
    assert_eq!(r["counts"]["top1_hits"], 14);
    assert_eq!(r["counts"]["top5_hits"], 16);
    assert!((r["top1"].as_f64().unwrap() - 14.0 / 17.0).abs() < 1e-12);
    assert!((r["top5"].as_f64().unwrap() - 16.0 / 17.0).abs() < 1e-12);
    assert_eq!(r["skipped"], 1);
    let skipped = &r["skipped_images"][0];
    assert!(skipped["path"].as_str().unwrap().ends_with("broken.jpg"));
    assert!(skipped["reason"].as_str().unwrap().contains("JPEG"));
    // 18 files in 5 batches of 4; floor(10% of 5) = 0 warm-up batches.
    assert_eq!(r["batches"], 5);
    assert_eq!(r["latency_model"]["batches"], 5);
    assert!(r["images_per_s"].as_f64().unwrap() > 0.0);
    let all = r["latency_all"]["mean_ms"].as_f64().unwrap();
    let model_only = r["latency_model"]["mean_ms"].as_f64().unwrap();
    assert!(
        all >= model_only && model_only > 0.0,
        "{all} vs {model_only}"
    );
    assert_eq!(r["preprocess"]["crop"], serde_json::json!([32, 32]));
    assert_eq!(r["preprocess"]["resize"], 36);

    let csv = std::fs::read_to_string(&preds).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "file,label,top1,top2,top3,top4,top5");
    assert_eq!(lines.len(), 18);
    let purple = lines.iter().find(|l| l.contains("p0.jpg")).unwrap();
    assert!(purple.ends_with(",5,0,3,2,1,4"), "{purple}");
    let gray = lines.iter().find(|l| l.contains("gray.png")).unwrap();
    assert!(gray.contains(",2,2,"), "{gray}");
}

#[test]
fn limit_shuffle_and_markdown() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let data = d.path().join("val");
    let map = make_dataset(&data);
    let m = model.to_str().unwrap();
    let ds = data.to_str().unwrap();
    let args = |seed: &str, p: &str| {
        vec![
            "validate".to_string(),
            m.into(),
            "--dataset".into(),
            ds.into(),
            "--class-map".into(),
            map.clone(),
            "--limit".into(),
            "6".into(),
            "--shuffle-seed".into(),
            seed.into(),
            "--save-predictions".into(),
            p.into(),
            "--json".into(),
        ]
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        trtkit(&a)
    };
    let p1 = d.path().join("a.csv");
    let p2 = d.path().join("b.csv");
    let p3 = d.path().join("c.csv");
    let r1 = json_of(&run(args("7", p1.to_str().unwrap())));
    json_of(&run(args("7", p2.to_str().unwrap())));
    json_of(&run(args("8", p3.to_str().unwrap())));
    assert_eq!(
        r1["images"].as_u64().unwrap() + r1["skipped"].as_u64().unwrap(),
        6
    );
    let a = std::fs::read_to_string(&p1).unwrap();
    assert_eq!(a, std::fs::read_to_string(&p2).unwrap());
    assert_ne!(a, std::fs::read_to_string(&p3).unwrap());

    let out = trtkit(&[
        "validate",
        m,
        "--dataset",
        ds,
        "--class-map",
        &map,
        "--markdown",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| top-1"), "{text}");
    assert!(text.contains("82.35%"), "{text}"); // 14/17
    assert!(text.contains("broken.jpg"), "{text}");
}

#[test]
fn bad_datasets_are_one_line_errors() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let m = model.to_str().unwrap();

    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = trtkit(&["validate", m, "--dataset", empty.to_str().unwrap()]);
    assert_clean_error(&out, 1, &["empty", "the dataset is empty"]);

    let no_images = d.path().join("noimg");
    std::fs::create_dir_all(no_images.join("cat")).unwrap();
    std::fs::write(no_images.join("cat/readme.txt"), "x").unwrap();
    let out = trtkit(&["validate", m, "--dataset", no_images.to_str().unwrap()]);
    assert_clean_error(&out, 1, &["noimg", "no images in them"]);

    let flat = d.path().join("flat");
    write_jpeg(&flat.join("a.jpg"), 40, 40, RED, 1);
    write_jpeg(&flat.join("b.jpg"), 40, 40, GREEN, 2);
    let labels = d.path().join("labels.txt");
    std::fs::write(&labels, "0\n").unwrap();
    let out = trtkit(&[
        "validate",
        m,
        "--dataset",
        flat.to_str().unwrap(),
        "--labels",
        labels.to_str().unwrap(),
    ]);
    assert_clean_error(&out, 1, &["labels.txt", "'b.jpg' has no label"]);

    let csv = d.path().join("labels.csv");
    std::fs::write(&csv, "a.jpg,0\nb.jpg,1\n").unwrap();
    let out = trtkit(&[
        "validate",
        m,
        "--dataset",
        flat.to_str().unwrap(),
        "--labels",
        csv.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(json_of(&out)["counts"]["top1_hits"], 2);

    let beyond = d.path().join("beyond");
    for k in 0..8 {
        write_jpeg(&beyond.join(format!("c{k}/a.jpg")), 40, 40, RED, 3);
    }
    write_jpeg(&beyond.join("c8/x.jpg"), 40, 40, RED, 3);
    let out = trtkit(&["validate", m, "--dataset", beyond.to_str().unwrap()]);
    assert_clean_error(
        &out,
        1,
        &["x.jpg", "label 8 is beyond the model's 8 classes"],
    );

    let out = trtkit(&[
        "validate",
        m,
        "--dataset",
        flat.to_str().unwrap(),
        "--batch-size",
        "0",
    ]);
    assert_clean_error(&out, 2, &["--batch-size"]);
}

#[test]
fn image_smaller_than_the_crop_is_skipped_and_reported() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let data = d.path().join("val");
    write_jpeg(&data.join("0_red/big.jpg"), 40, 40, RED, 1);
    write_jpeg(&data.join("0_red/tiny.jpg"), 10, 12, RED, 2);
    let out = trtkit(&[
        "validate",
        model.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--resize",
        "0",
        "--json",
    ]);
    let r = json_of(&out);
    assert_eq!(r["images"], 1);
    assert_eq!(r["counts"]["top1_hits"], 1);
    assert_eq!(r["skipped"], 1);
    let reason = r["skipped_images"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("10×12, smaller than the 32×32 crop"),
        "{reason}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tiny.jpg"), "{stderr}");
}

/// The INT8 (calibrated on the dataset's own images) and FP16 rewrites of the colour model
/// validate exactly like the FP32 model: its class margins are far above the rounding.
#[test]
fn int8_and_fp16_rewrites_validate_like_fp32() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let data = d.path().join("val");
    let map = make_dataset(&data);
    let m = model.to_str().unwrap();
    let ds = data.to_str().unwrap();
    let cal = json_of(&trtkit(&[
        "calibrate",
        m,
        "--calib-data",
        ds,
        "--batch-size",
        "4",
        "--cache-dir",
        d.path().join("cal").to_str().unwrap(),
        "--json",
    ]));
    let cache = cal["caches"][0]["cache"].as_str().unwrap();
    let int8 = d.path().join("int8.onnx");
    let fp16 = d.path().join("fp16.onnx");
    let quantize = |extra: &[&str]| {
        let mut a = vec!["quantize", m];
        a.extend_from_slice(extra);
        let out = trtkit(&a);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    quantize(&[
        "--int8",
        "--calibration-cache",
        cache,
        "-o",
        int8.to_str().unwrap(),
    ]);
    quantize(&["--fp16", "-o", fp16.to_str().unwrap()]);
    for rewritten in [&int8, &fp16] {
        let r = json_of(&trtkit(&[
            "validate",
            rewritten.to_str().unwrap(),
            "--dataset",
            ds,
            "--class-map",
            &map,
            "--batch-size",
            "4",
            "--json",
        ]));
        assert_eq!(r["images"], 17, "{}", rewritten.display());
        assert_eq!(r["counts"]["top1_hits"], 14, "{}", rewritten.display());
        assert_eq!(r["counts"]["top5_hits"], 16, "{}", rewritten.display());
    }
}

/// `count` tiny red PNGs under `root/0_red` (class 0).
fn tiny_reds(root: &Path, count: usize) {
    let dir = root.join("0_red");
    std::fs::create_dir_all(&dir).unwrap();
    let pixels: Vec<u8> = (0..4 * 4).flat_map(|_| RED).collect();
    let mut encoded = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut encoded, 4, 4);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.write_header()
            .unwrap()
            .write_image_data(&pixels)
            .unwrap();
    }
    for i in 0..count {
        std::fs::write(dir.join(format!("{i:05}.png")), &encoded).unwrap();
    }
}

fn validate_json(model: &Path, data: &Path, batch: &str) -> serde_json::Value {
    json_of(&trtkit(&[
        "validate",
        model.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--backend",
        "tract",
        "--batch-size",
        batch,
        "--json",
    ]))
}

/// A batch size far beyond the images runs the images, at a batch of their number: no padding
/// to a size nobody asked for, and memory stays small.
#[test]
fn a_batch_size_beyond_the_images_runs_the_images() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let data = d.path().join("val");
    tiny_reds(&data, 5);
    let r = validate_json(&model, &data, "1000000000");
    assert_eq!(r["images"], 5);
    assert_eq!(r["batch_size"], 5);
    assert_eq!(r["batches"], 1);
    assert_eq!(r["counts"]["top1_hits"], 5);
    let rss = r["peak_rss_bytes"].as_u64().unwrap();
    assert!(rss < 1 << 30, "peak RSS {rss} bytes");
}

/// Memory is bounded by the loader's ring, not by the dataset: 10,000 images take no more
/// than 500 do, give or take the list of their paths.
#[test]
fn memory_stays_bounded_whatever_the_dataset_size() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let (small, large) = (d.path().join("small"), d.path().join("large"));
    tiny_reds(&small, 500);
    tiny_reds(&large, 10_000);
    let a = validate_json(&model, &small, "64");
    let b = validate_json(&model, &large, "64");
    assert_eq!(b["images"], 10_000);
    assert_eq!(b["counts"]["top1_hits"], 10_000);
    let (ra, rb) = (
        a["peak_rss_bytes"].as_u64().unwrap(),
        b["peak_rss_bytes"].as_u64().unwrap(),
    );
    assert!(rb < ra + (48 << 20), "500 images: {ra} bytes, 10,000: {rb}");
}

/// The report says where the time went, and the parts fit in the wall time.
#[test]
fn the_report_splits_the_wall_time() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let data = d.path().join("val");
    tiny_reds(&data, 40);
    let r = validate_json(&model, &data, "8");
    let split = &r["time_split"];
    let part = |k: &str| split[k].as_f64().unwrap();
    let parts = part("setup_s") + part("wait_images_s") + part("model_s") + part("scoring_s");
    assert!(part("model_s") > 0.0 && part("setup_s") > 0.0);
    assert!(
        parts <= r["wall_s"].as_f64().unwrap() * 1.01,
        "{split} in {}",
        r["wall_s"]
    );
    assert_eq!(
        (part("h2d_s"), part("d2h_s")),
        (0.0, 0.0),
        "no GPU copies on tract-cpu"
    );
    assert_eq!(r["loader"]["images"], 40);
    assert!(r["loader"]["images_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(r["data_path"], "host tensors");
    assert!(r["steady_images_per_s"].as_f64().unwrap() > 0.0);
}

/// A model whose input height and width are not fixed takes the crop's size; without a crop the
/// error names the setting validate has (--crop, or the file's crop), not flags it lacks.
#[test]
fn a_dynamic_height_and_width_take_the_crop() {
    let d = tempfile::tempdir().unwrap();
    let mut proto = colour_model();
    let input = &mut proto.graph.as_mut().unwrap().input[0];
    let dims = [
        Dim::Symbol("batch".into()),
        Dim::Fixed(3),
        Dim::Symbol("h".into()),
        Dim::Symbol("w".into()),
    ];
    trtkit::onnx::tensor_info::set_dims(input, &dims);
    let model = save(d.path(), "dynamic_hw.onnx", proto);
    let data = d.path().join("val");
    let map = make_dataset(&data);
    let (m, ds) = (model.to_str().unwrap(), data.to_str().unwrap());
    let run = ["validate", m, "--dataset", ds, "--class-map", &map, "-q"];
    let out = trtkit(&run);
    assert_clean_error(
        &out,
        1,
        &["dynamic_hw.onnx", "no fixed height and width", "--crop N"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("--dim") && !stderr.contains("--input-shape"),
        "{stderr}"
    );
    let r = json_of(&trtkit(&[&run[..], &["--crop", "32", "--json"]].concat()));
    assert_eq!(r["images"], 17);
    assert_eq!(r["counts"]["top1_hits"], 14);
    assert_eq!(r["preprocess"]["crop"], serde_json::json!([32, 32]));
}

/// A model whose one image does not fit in memory (a declared 3×1,000,000×1,000,000 input) is
/// refused before anything is allocated, saying the bytes one sample needs.
#[test]
fn a_model_whose_one_sample_does_not_fit_is_refused_before_allocating() {
    let d = tempfile::tempdir().unwrap();
    let mut proto = colour_model();
    let input = &mut proto.graph.as_mut().unwrap().input[0];
    let side = Dim::Fixed(1_000_000);
    let dims = [
        Dim::Symbol("batch".into()),
        Dim::Fixed(3),
        side.clone(),
        side,
    ];
    trtkit::onnx::tensor_info::set_dims(input, &dims);
    let model = save(d.path(), "huge.onnx", proto);
    let data = d.path().join("val");
    tiny_reds(&data, 2);
    let out = trtkit(&[
        "validate",
        model.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
    ]);
    assert_clean_error(
        &out,
        1,
        &["huge.onnx", "one sample needs at least 10.9 TiB"],
    );
}
