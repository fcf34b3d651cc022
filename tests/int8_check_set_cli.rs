//! The INT8 triage's honesty about its samples: every sample is scored (a short last batch is
//! padded, not dropped), a target is "met" only when samples the search never tuned on meet
//! it, and every score carries a bootstrap interval that contains it.

mod support;

use serde_json::Value;
use std::path::Path;
use support::{stdout_of_success, trtkit};
use trtkit::calibration::sample_source::normal_values;
use trtkit::tensor::{HostTensor, TensorData};

/// `trtkit quantize MODEL --int8 --calibration-cache CACHE ARGS… --json`, parsed.
fn quantize(model: &Path, cache: &str, args: &[&str]) -> Value {
    support::int8_json(model, cache, args)
}

/// `n` samples of the model's input, N(0, 1) times `gain`, saved as one `.npz` in `dir`.
fn samples(dir: &Path, n: usize, gain: f32, seed: u64) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let values = normal_values(seed, n * 4 * 8 * 8)
        .into_iter()
        .map(|v| v * gain)
        .collect();
    let t = HostTensor::new("input", vec![n, 4, 8, 8], TensorData::F32(values)).unwrap();
    trtkit::data::npz::save(&dir.join("samples.npz"), &[t]).unwrap();
    dir.to_str().unwrap().to_string()
}

fn cosine(score: &Value) -> f64 {
    score["cosine"].as_f64().unwrap()
}

/// Each score's intervals are there and contain it.
fn assert_intervals_hold(score: &Value) {
    let [lo, hi] = [0, 1].map(|i| score["cosine_interval"][i].as_f64().unwrap());
    assert!(lo <= cosine(score) && cosine(score) <= hi, "{score:#}");
    let a = score["top1_agreement_pct"].as_f64().unwrap();
    let [alo, ahi] = [0, 1].map(|i| score["top1_agreement_interval"][i].as_f64().unwrap());
    assert!(alo <= a && a <= ahi, "{score:#}");
}

#[test]
fn eleven_samples_at_batch_eight_are_all_scored_with_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cache) = support::scaled_model_and_cache(dir.path());
    let data = samples(&dir.path().join("eleven"), 11, 1.0, 3);
    let out = dir.path().join("m.onnx");
    let o = out.to_str().unwrap();
    let base = ["--eval-data", &data, "--batch-size", "8", "-o", o];
    let split = quantize(&model, &cache, &base);
    let (tune, check) = (&split["score"], &split["check"]);
    assert_eq!(
        tune["samples"].as_u64().unwrap() + check["samples"].as_u64().unwrap(),
        11,
        "{split:#}"
    );
    assert_eq!(split["samples"]["tune"], 8, "{split:#}");
    assert_eq!(split["samples"]["check"], 3, "{split:#}");
    assert_eq!(split["samples"]["left_out"], 0);
    assert_intervals_hold(tune);
    assert_intervals_hold(check);
    let all = quantize(
        &model,
        &cache,
        &[&base[..], &["--check-fraction", "0"]].concat(),
    );
    assert_eq!(all["score"]["samples"], 11, "{all:#}");
    assert!(all.get("check").is_none(), "{all:#}");
    assert_intervals_hold(&all["score"]);
    // A limit leaves samples out, and the report says how many.
    let limited = quantize(
        &model,
        &cache,
        &[&base[..], &["--eval-samples", "9"]].concat(),
    );
    assert_eq!(limited["samples"]["left_out"], 2, "{limited:#}");
}

#[test]
fn a_target_met_on_its_tuning_samples_is_not_met_until_the_check_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cache) = support::scaled_model_and_cache(dir.path());
    // Four tuning samples like the calibration data; check samples twenty times larger, far
    // past the calibrated ranges, where INT8 clips.
    let easy = samples(&dir.path().join("easy"), 4, 1.0, 11);
    let hard = samples(&dir.path().join("hard"), 6, 20.0, 12);
    let out = dir.path().join("t.onnx");
    let o = out.to_str().unwrap();
    let target = [
        "--target-cosine",
        "0.999",
        "--eval-data",
        &easy,
        "--scale-search",
        "off",
        "-o",
        o,
    ];
    // On the tuning samples alone the goal is met with some nodes in float…
    let alone = quantize(
        &model,
        &cache,
        &[&target[..], &["--check-fraction", "0"]].concat(),
    );
    assert_eq!(alone["met"], true, "{alone:#}");
    assert!(alone["notes"][0].as_str().unwrap().contains("no check set"));
    let float: Vec<&str> = alone["float_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // …and that model misses it on the check samples.
    let measured = quantize(
        &model,
        &cache,
        &[
            "--eval-data",
            &easy,
            "--check-data",
            &hard,
            "--scale-search",
            "off",
            "--exclude",
            &float.join(","),
            "-o",
            o,
        ],
    );
    assert!(cosine(&measured["check"]) < 0.999, "{measured:#}");
    // With the check set, the search does not stop at the tuning score.
    let args = [&target[..], &["--check-data", &hard]].concat();
    let checked = quantize(&model, &cache, &args);
    assert_eq!(checked["met_on_tuning"], true, "{checked:#}");
    let met = checked["met"].as_bool().unwrap();
    assert_eq!(met, cosine(&checked["check"]) >= 0.999, "{checked:#}");
    assert!(
        checked["notes"][0]
            .as_str()
            .unwrap()
            .contains("the check samples miss"),
        "{checked:#}"
    );
    assert!(
        checked["float_nodes"].as_array().unwrap().len() > float.len(),
        "{checked:#}"
    );
    // The terminal says on which samples it was met.
    let text = stdout_of_success(&trtkit(
        &[
            &[
                "quantize",
                model.to_str().unwrap(),
                "--int8",
                "--calibration-cache",
                &cache,
                "--research",
            ][..],
            &args,
        ]
        .concat(),
    ));
    let verdict = text.lines().next().unwrap();
    if met {
        assert!(verdict.contains("met on the 6 check samples"), "{text}");
    } else {
        assert!(verdict.contains("NOT met on the check samples"), "{text}");
    }
}

/// `n` samples saved as `name` in `dir` (N(0, 1), seeded).
fn samples_file(dir: &Path, name: &str, n: usize, seed: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let values = normal_values(seed, n * 4 * 8 * 8);
    let t = HostTensor::new("input", vec![n, 4, 8, 8], TensorData::F32(values)).unwrap();
    trtkit::data::npz::save(&dir.join(name), &[t]).unwrap();
}

#[test]
fn the_check_set_says_what_it_shares_with_the_tuning_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cache) = support::scaled_model_and_cache(dir.path());
    let out = dir.path().join("m.onnx");
    let o = out.to_str().unwrap();
    // Twelve crops in one file: the split can only be by sample, and both sides share the file.
    let one = dir.path().join("one");
    samples_file(&one, "crops.npz", 12, 21);
    let one = one.to_str().unwrap();
    let shared = quantize(&model, &cache, &["--eval-data", one, "-o", o]);
    let origin = &shared["samples"]["check_origin"];
    assert_eq!(origin["split"], "by_sample", "{shared:#}");
    assert_eq!(origin["shared_files"][0], "crops.npz", "{shared:#}");
    let warning = origin["warning"].as_str().unwrap();
    assert!(warning.contains("overstate"), "{warning}");
    // The searched scales were weighed against the cache's on the check samples.
    let verdict = &shared["scale_search"]["verdict"];
    assert_eq!(verdict["judged_on"], "check", "{shared:#}");
    let kept_plain = verdict["kept_plain"].as_bool().unwrap();
    let (plain, searched) = (
        verdict["plain_cosine"].as_f64().unwrap(),
        verdict["searched_cosine"].as_f64().unwrap(),
    );
    assert_eq!(kept_plain, plain > searched, "{verdict:#}");
    let text = stdout_of_success(&trtkit(&[
        "quantize",
        model.to_str().unwrap(),
        "--int8",
        "--calibration-cache",
        &cache,
        "--eval-data",
        one,
        "-o",
        o,
    ]));
    assert!(
        text.contains("split by sample; 1 file tuned on, 1 checked on, 1 shared"),
        "{text}"
    );
    assert!(
        text.contains("warning: the check samples share 1 of their files"),
        "{text}"
    );
    assert!(
        text.contains("scales are kept: the whole INT8 model's cosine"),
        "{text}"
    );

    // Four files of three: whole files go to the check set, none shared, no warning.
    let four = dir.path().join("four");
    for k in 0..4 {
        samples_file(&four, &format!("photo{k}.npz"), 3, 30 + k);
    }
    let apart = quantize(
        &model,
        &cache,
        &["--eval-data", four.to_str().unwrap(), "-o", o],
    );
    let origin = &apart["samples"]["check_origin"];
    assert_eq!(origin["split"], "by_file", "{apart:#}");
    assert_eq!(
        (
            origin["tune_files"].as_u64(),
            origin["check_files"].as_u64()
        ),
        (Some(3), Some(1))
    );
    assert_eq!(
        origin["shared_files"].as_array().unwrap().len(),
        0,
        "{apart:#}"
    );
    assert!(origin.get("warning").is_none(), "{apart:#}");
    assert_eq!(apart["samples"]["check"], 3, "{apart:#}");

    // A check source that names the tuning file is sharing too.
    let same = quantize(
        &model,
        &cache,
        &["--eval-data", one, "--check-data", one, "-o", o],
    );
    let origin = &same["samples"]["check_origin"];
    assert_eq!(origin["split"], "separate", "{same:#}");
    assert!(origin["warning"].is_string(), "{same:#}");
}
