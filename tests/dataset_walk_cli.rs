//! Every command reads a dataset folder by one rule (`trtkit::data::walk`): `validate` and
//! `calibrate` see the same images (nested ones included; hidden folders, loops and broken links
//! left out and listed), an empty class folder cannot shift the class indices, and a mask whose
//! size is not its image's stops `validate` before anything runs.

mod support;

use std::os::unix::fs::symlink;
use std::path::Path;
use support::{assert_clean_error, save, stdout_of_success, trtkit, write_jpeg};
use trtkit::onnx::graph_builder::{attr_int, tensor_f32, GraphBuilder};
use trtkit::onnx::pb::tensor_proto::DataType;
use trtkit::onnx::pb::ModelProto;
use trtkit::tensor::Dim;

/// `input` [N,3,32,32] → mean colour → `logits` [N,4]: classes 0-2 are the R, G, B channel
/// means, class 3 a constant -50 (never predicted).
fn colour_model() -> ModelProto {
    let mut w = vec![0f32; 3 * 4];
    for c in 0..3 {
        w[c * 4 + c] = 1.0;
    }
    let n = Dim::Symbol("batch".into());
    let mut g = GraphBuilder::new("colour4");
    g.input(
        "input",
        DataType::Float,
        &[n.clone(), Dim::Fixed(3), Dim::Fixed(32), Dim::Fixed(32)],
    )
    .output("logits", DataType::Float, &[n, Dim::Fixed(4)])
    .initializer(tensor_f32("w", &[3, 4], &w))
    .initializer(tensor_f32("b", &[4], &[0.0, 0.0, 0.0, -50.0]))
    .node("GlobalAveragePool", &["input"], &["pooled"], vec![])
    .node("Flatten", &["pooled"], &["flat"], vec![attr_int("axis", 1)])
    .node("Gemm", &["flat", "w", "b"], &["logits"], vec![]);
    g.build()
}

const RED: [u8; 3] = [200, 30, 30];
const GREEN: [u8; 3] = [30, 200, 30];
const BLUE: [u8; 3] = [30, 30, 200];

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&stdout_of_success(out)).unwrap()
}

/// Writes an 8-bit RGB PNG of one colour, creating its folder.
fn write_png(path: &Path, w: u32, h: u32, rgb: [u8; 3]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut enc = png::Encoder::new(file, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let data: Vec<u8> = (0..w * h).flat_map(|_| rgb).collect();
    enc.write_header().unwrap().write_image_data(&data).unwrap();
}

/// Three colour classes and an empty class folder between them, for a 4-class model: without a
/// class map the empty folder would take index 1 and shift green and blue (33% top-1).
#[test]
fn an_empty_class_folder_stops_validate_unless_a_class_map_is_given() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let m = model.to_str().unwrap();
    let val = d.path().join("val");
    write_jpeg(&val.join("a_red/r.jpg"), 40, 40, RED, 1);
    std::fs::create_dir_all(val.join("b_empty")).unwrap();
    std::fs::write(val.join("b_empty/readme.txt"), "nothing here").unwrap();
    write_jpeg(&val.join("c_green/g.jpg"), 40, 40, GREEN, 2);
    write_jpeg(&val.join("d_blue/b.jpg"), 40, 40, BLUE, 3);
    // A notebook's checkpoint folder is no class either.
    write_jpeg(&val.join(".ipynb_checkpoints/x.jpg"), 40, 40, BLUE, 4);
    let ds = val.to_str().unwrap();

    let out = trtkit(&["validate", m, "--dataset", ds, "--json"]);
    let empty = val.join("b_empty").display().to_string();
    assert_clean_error(
        &out,
        1,
        &[
            &format!("{empty}: class folder has no images"),
            "--class-map",
        ],
    );

    let map = d.path().join("classes.txt");
    std::fs::write(&map, "a_red\nc_green\nd_blue\nb_empty\n").unwrap();
    let map = map.to_str().unwrap();
    let out = trtkit(&["validate", m, "--dataset", ds, "--class-map", map, "--json"]);
    let r = json(&out);
    assert_eq!(r["images"], 3);
    assert_eq!(r["counts"]["top1_hits"], 3);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("b_empty: class folder has no images"),
        "{stderr}"
    );

    // With the empty folder gone, the folders alone give the same answer.
    std::fs::remove_dir_all(val.join("b_empty")).unwrap();
    let r = json(&trtkit(&["validate", m, "--dataset", ds, "--json"]));
    assert_eq!(r["counts"]["top1_hits"], 3);
}

/// `validate --json` and `calibrate --json` over one folder with nested images, a hidden
/// folder, a link back up (`ln -s .. 090/dirloop`) and a broken link: the same images, and the
/// loop and the broken link named with their reasons.
#[test]
fn validate_and_calibrate_read_the_same_files() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let m = model.to_str().unwrap();
    let val = d.path().join("val");
    write_jpeg(&val.join("090/r0.jpg"), 40, 40, RED, 1);
    write_jpeg(&val.join("090/nested/deeper/r1.jpg"), 40, 40, RED, 2);
    write_png(&val.join("091/g0.png"), 40, 40, GREEN);
    write_jpeg(&val.join("091/more/g1.JPEG"), 40, 40, GREEN, 3);
    write_jpeg(&val.join("091/.hidden/g2.jpg"), 40, 40, BLUE, 4);
    symlink("..", val.join("090/dirloop")).unwrap();
    symlink("nowhere.jpg", val.join("091/gone.jpg")).unwrap();
    let ds = val.to_str().unwrap();

    let v = json(&trtkit(&["validate", m, "--dataset", ds, "--json"]));
    assert_eq!(v["images"], 4, "{v}");
    assert_eq!(v["counts"]["top1_hits"], 4, "{v}");

    let cal = trtkit(&[
        "calibrate",
        m,
        "--calib-data",
        ds,
        "--batch-size",
        "2",
        "--cache-dir",
        d.path().join("cal").to_str().unwrap(),
        "--json",
    ]);
    let c = json(&cal);
    assert_eq!(c["caches"][0]["key"]["image_count"], v["images"], "{c}");
    assert_eq!(c["samples_left_out"], 0, "{c}");

    let stderr = String::from_utf8_lossy(&cal.stderr);
    let listed: Vec<(String, String)> = v["skipped_images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (name, why) in [("dirloop", "loop"), ("gone.jpg", "broken symbolic link")] {
        assert!(
            stderr.contains(&format!("{name}: ")) && stderr.contains(why),
            "calibrate does not list {name}: {stderr}"
        );
        assert!(
            listed
                .iter()
                .any(|(p, r)| p.ends_with(name) && r.contains(why)),
            "validate does not list {name}: {listed:?}"
        );
    }
}

/// A segmentation dataset whose mask is not its image's size: named with both files and both
/// sizes before anything runs; a transposed one is called so.
#[test]
fn a_mask_of_another_size_is_refused_naming_both_files() {
    let d = tempfile::tempdir().unwrap();
    let model = save(
        d.path(),
        "seg.onnx",
        trtkit::onnx::test_models::segmenter(3, 32, None),
    );
    let m = model.to_str().unwrap();
    let (images, masks) = (d.path().join("images"), d.path().join("masks"));
    write_png(&images.join("a.png"), 286, 143, RED);
    write_jpeg(&images.join("b.jpg"), 286, 143, GREEN, 1);
    let gray = |path: &Path, w: u32, h: u32| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
        let mut enc = png::Encoder::new(file, w, h);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Eight);
        let data = vec![0u8; (w * h) as usize];
        enc.write_header().unwrap().write_image_data(&data).unwrap();
    };
    gray(&masks.join("a.png"), 286, 143);
    gray(&masks.join("b.png"), 10, 10);
    let args = [
        "validate",
        m,
        "--dataset",
        images.to_str().unwrap(),
        "--masks",
        masks.to_str().unwrap(),
        "--json",
    ];
    let mask_b = masks.join("b.png").display().to_string();
    let image_b = images.join("b.jpg").display().to_string();
    let out = trtkit(&args);
    assert_clean_error(
        &out,
        1,
        &[&format!(
            "{mask_b}: mask is 10×10 but its image {image_b} is 286×143"
        )],
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("swapped"));

    gray(&masks.join("b.png"), 143, 286);
    let out = trtkit(&args);
    assert_clean_error(
        &out,
        1,
        &[&format!(
            "{mask_b}: mask is 143×286 but its image {image_b} is 286×143 (width and height swapped?)"
        )],
    );

    gray(&masks.join("b.png"), 286, 143);
    let v = json(&trtkit(&args));
    assert_eq!(v["segment"]["images"], 2, "{v}");
}

/// A flat folder's calibration fingerprint is what it was before the walk: SHA-256 over each
/// image's name then its bytes, in sorted name order, other files left out; so caches made
/// before stay valid.
#[test]
fn a_flat_folder_keeps_its_calibration_fingerprint() {
    use sha2::{Digest, Sha256};
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let flat = d.path().join("flat");
    for (i, name) in ["b.jpg", "A.JPG", "a.jpeg", "a-1.jpg", "a.jpg", "Z.jpg"]
        .iter()
        .enumerate()
    {
        write_jpeg(&flat.join(name), 36, 36, RED, i as u64);
    }
    write_png(&flat.join("c.png"), 36, 36, GREEN);
    std::fs::write(flat.join("notes.txt"), "not an image").unwrap();
    let mut names: Vec<String> = support::files(&flat)
        .into_iter()
        .filter(|n| !n.ends_with(".txt"))
        .collect();
    names.sort();
    let mut hasher = Sha256::new();
    for n in &names {
        hasher.update(n.as_bytes());
        hasher.update(std::fs::read(flat.join(n)).unwrap());
    }
    let expected = format!("{:x}", hasher.finalize());
    let c = json(&trtkit(&[
        "calibrate",
        model.to_str().unwrap(),
        "--calib-data",
        flat.to_str().unwrap(),
        "--batch-size",
        "2",
        "--cache-dir",
        d.path().join("cal").to_str().unwrap(),
        "--json",
    ]));
    let key = &c["caches"][0]["key"];
    assert_eq!(key["image_count"], 7, "{c}");
    assert_eq!(key["dataset_fingerprint"], expected.as_str(), "{c}");
}

/// A calibration batch size far beyond the images reads the images in one batch, without
/// buffers sized for the batch asked for.
#[test]
fn calibrate_with_a_huge_batch_size_reads_the_images() {
    let d = tempfile::tempdir().unwrap();
    let model = save(d.path(), "colour.onnx", colour_model());
    let flat = d.path().join("flat");
    for i in 0..3u64 {
        write_jpeg(&flat.join(format!("{i}.jpg")), 36, 36, RED, i);
    }
    let c = json(&trtkit(&[
        "calibrate",
        model.to_str().unwrap(),
        "--calib-data",
        flat.to_str().unwrap(),
        "--batch-size",
        "1000000000",
        "--cache-dir",
        d.path().join("cal").to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(c["caches"][0]["key"]["image_count"], 3, "{c}");
}
