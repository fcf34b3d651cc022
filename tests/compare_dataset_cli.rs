//! `trtkit compare A B --dataset DIR` outside a workspace: the images of a flat folder,
//! preprocessed as validate preprocesses them (the flags, or a `--config` trtkit.toml's
//! [preprocess]), feed both sides.

mod support;

use std::path::Path;
use support::{assert_clean_error, save, stdout_of_success, trtkit, write_jpeg};
use trtkit::data::npz;
use trtkit::onnx::test_models::classifier;

/// Three red-ish 20×20 JPEGs in a flat folder.
fn images(dir: &Path) -> String {
    let folder = dir.join("photos");
    for i in 0..3 {
        write_jpeg(&folder.join(format!("p{i}.jpg")), 20, 20, [200, 40, 30], i);
    }
    folder.to_str().unwrap().to_string()
}

/// Mean of channel `c` of the saved `[N, 3, 16, 16]` inputs.
fn channel_mean(file: &Path, c: usize) -> f64 {
    let t = &npz::load(file).unwrap()[0];
    assert_eq!(t.shape, [3, 3, 16, 16]);
    let v = t.data.to_f64();
    let plane = 16 * 16;
    let values: Vec<f64> = (0..3)
        .flat_map(|n| v[(n * 3 + c) * plane..(n * 3 + c + 1) * plane].to_vec())
        .collect();
    values.iter().sum::<f64>() / values.len() as f64
}

#[test]
fn a_folder_of_images_feeds_both_sides_preprocessed_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let photos = images(dir.path());
    let model = save(dir.path(), "c.onnx", classifier(None));
    let model = model.to_str().unwrap();
    let saved = |name: &str| dir.path().join(name);
    let run = |name: &str, extra: &[&str]| {
        let file = saved(name);
        let mut args = vec!["compare", model, model, "--dataset", &photos, "--json"];
        args.extend_from_slice(&["--save-inputs", file.to_str().unwrap()]);
        args.extend_from_slice(extra);
        serde_json::from_str::<serde_json::Value>(&stdout_of_success(&trtkit(&args))).unwrap()
    };
    let r = run("default.npz", &[]);
    assert_eq!(
        r["inputs"],
        format!("3 images of {photos}, preprocessed for the model")
    );
    assert_eq!(
        r["outputs"][0]["closeness"]["equal_pct"].as_f64(),
        Some(100.0)
    );
    assert_eq!(r["sides"][0]["samples"].as_u64(), Some(3));
    // ImageNet's mean and std by default: red is far above its mean, blue below.
    let (red, blue) = (
        channel_mean(&saved("default.npz"), 0),
        channel_mean(&saved("default.npz"), 2),
    );
    assert!(red > 0.8 && blue < -0.9, "{red} {blue}");

    // Unnormalised, then BGR: the channels are the image's own values in [0, 1], swapped.
    run("plain.npz", &["--mean", "0,0,0", "--std", "1,1,1"]);
    let red = channel_mean(&saved("plain.npz"), 0);
    assert!((red - 200.0 / 255.0).abs() < 0.05, "{red}");
    run(
        "bgr.npz",
        &[
            "--mean",
            "0,0,0",
            "--std",
            "1,1,1",
            "--channel-order",
            "bgr",
        ],
    );
    assert!((channel_mean(&saved("bgr.npz"), 2) - red).abs() < 1e-6);

    // A trtkit.toml's [preprocess] gives the same inputs as the flags; a flag wins over it.
    let toml = dir.path().join("trtkit.toml");
    std::fs::write(
        &toml,
        "[preprocess]\nmean = [0.0, 0.0, 0.0]\nstd = [1.0, 1.0, 1.0]\nchannel_order = \"bgr\"\n",
    )
    .unwrap();
    let toml = toml.to_str().unwrap();
    run("file.npz", &["--config", toml]);
    assert_eq!(
        npz::load(&saved("file.npz")).unwrap(),
        npz::load(&saved("bgr.npz")).unwrap()
    );
    run("over.npz", &["--config", toml, "--channel-order", "rgb"]);
    assert_eq!(
        npz::load(&saved("over.npz")).unwrap(),
        npz::load(&saved("plain.npz")).unwrap()
    );

    // --num-samples takes the first images; a folder without images is said so.
    let r = run("two.npz", &["--num-samples", "2"]);
    assert_eq!(r["sides"][1]["samples"].as_u64(), Some(2));
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = trtkit(&[
        "compare",
        model,
        model,
        "--dataset",
        empty.to_str().unwrap(),
    ]);
    assert_clean_error(&out, 1, &["empty", "no images"]);
}
