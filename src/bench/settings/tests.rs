//! The settings table's promises: the key's digest as 0.1.0 wrote it, every setting in the key
//! as declared, every flag a plan-file key saying its default.

use super::*;
use crate::backend::select::Runtime as Target;

/// The settings of a plan that names none but its matrix.
pub(super) fn plain() -> CellSettings {
    CellSettings {
        dataset: None,
        masks: None,
        coco: None,
        limit: None,
        compare_on: None,
        compare_samples: None,
        calib_data: "synthetic:0".into(),
        calib_samples: None,
        warmup: 3,
        iterations: None,
        duration_s: 2.0,
        threads: None,
        nvml_hz: 20.0,
        device_id: 0,
        tensorrt_dir: None,
        batch_range: (1, 1),
        input_shapes: vec![],
        dim_max: Default::default(),
        preprocess: PreprocessRequest::default(),
    }
}

/// Settings that differ from [`plain`] in every field.
pub(super) fn full() -> CellSettings {
    CellSettings {
        dataset: Some(PathBuf::from("val")),
        masks: Some(PathBuf::from("masks")),
        coco: Some(PathBuf::from("boxes.json")),
        limit: Some(50),
        compare_on: Some(Target::OrtCpu),
        compare_samples: Some(16),
        calib_data: "calib".into(),
        calib_samples: Some(64),
        warmup: 5,
        iterations: Some(100),
        duration_s: 1.5,
        threads: Some(4),
        nvml_hz: 10.0,
        device_id: 1,
        tensorrt_dir: Some(PathBuf::from("/opt/trt")),
        batch_range: (2, 32),
        input_shapes: vec!["input_ids:-1x128".into()],
        dim_max: [("seq".to_string(), 512)].into(),
        preprocess: PreprocessRequest {
            resize: Some(256),
            crop: Some(224),
            ..Default::default()
        },
    }
}

/// Keys written by trtkit 0.1.0 for these settings: journals it wrote resume only while
/// the digest of the settings that exist stays byte for byte what it was.
#[test]
fn the_digest_is_what_0_1_0_wrote() {
    let written = [
        (plain(), Target::TractCpu, "ef34178974e5ff6f"),
        (plain(), Target::Trt, "562c63ce72293eaf"),
        (full(), Target::OrtCpu, "9da44355363c607f"),
        (full(), Target::Trt, "fe75fb7f6a3c242c"),
    ];
    for (settings, target, digest) in written {
        assert_eq!(settings.digest(target), digest, "{target}: {settings:?}");
    }
}

/// Each cell setting, set alone to another value, changes the digest of the cells it is in
/// the key of, and only those: the table is what decides, for every setting it declares.
#[test]
fn every_setting_reaches_the_key_as_declared() {
    let (base, other) = (plain(), full());
    let base_json = serde_json::to_value(&base).unwrap();
    let other_json = serde_json::to_value(&other).unwrap();
    let entries = base.key_entries();
    assert_eq!(
        entries.len(),
        base_json.as_object().unwrap().len(),
        "every cell setting is in the table"
    );
    for (name, value, in_key) in entries {
        assert_ne!(value, other_json[name], "{name}: full() must change it");
        let mut changed = base_json.clone();
        changed[name] = other_json[name].clone();
        let changed: CellSettings = serde_json::from_value(changed).unwrap();
        for target in [Target::Trt, Target::OrtCpu] {
            let expected = match in_key {
                InKey::Always | InKey::WhenSet => true,
                InKey::TrtOnly => target == Target::Trt,
                InKey::Never => false,
            };
            assert_eq!(
                changed.digest(target) != base.digest(target),
                expected,
                "{name} ({in_key:?}) on {target}"
            );
        }
    }
}

/// A setting left unset where it is in the key only when set gives the digest it gave
/// before it existed; set, it joins the key.
#[test]
fn an_unset_setting_stays_out_of_the_key() {
    let base = plain();
    let entries = base.key_entries();
    let when_set: Vec<&str> = entries
        .iter()
        .filter(|(_, _, k)| *k == InKey::WhenSet)
        .map(|(n, _, _)| *n)
        .collect();
    assert_eq!(when_set, ["masks", "coco", "input_shapes", "dim_max"]);
    let json = serde_json::to_value(&base).unwrap();
    let mut without = serde_json::Map::new();
    for (name, value, in_key) in entries {
        if in_key == InKey::Always {
            without.insert(name.to_string(), value);
        }
    }
    assert_eq!(json.as_object().unwrap().len(), 19);
    let expected = sha256_hex16(serde_json::Value::Object(without).to_string().as_bytes());
    assert_eq!(base.digest(Target::OrtCpu), expected);
}

/// The help of a flag with a default says it, as the table declares it.
#[test]
fn every_flag_says_its_default() {
    use clap::Args;
    let command = SettingFlags::augment_args(clap::Command::new("bench"));
    let defaults = FlagValues::defaults();
    assert_eq!(defaults.len(), 8, "{defaults:?}");
    for (name, default) in defaults {
        let arg = command
            .get_arguments()
            .find(|a| a.get_id() == name)
            .unwrap_or_else(|| panic!("no flag {name}"));
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        assert!(
            help.ends_with(&format!(" (default {default})")),
            "{name}: {help}"
        );
    }
    let help = |name: &str| {
        let arg = command.get_arguments().find(|a| a.get_id() == name);
        arg.and_then(|a| a.get_help()).map(|h| h.to_string())
    };
    assert_eq!(
        help("cell_timeout").unwrap(),
        "Time limit of one cell in seconds, preparation included (default 600)"
    );
    let run = PlanFile::run_defaults();
    assert_eq!(
        (run.reference, run.cell_timeout, run.cpu_cells, run.name),
        (Some(Target::TractCpu), Some(600.0), Some(1), None)
    );
    assert_eq!(
        help("warmup").unwrap(),
        "Warm-up iterations per cell (default 3)"
    );
    assert_eq!(
        help("duration").unwrap(),
        "Seconds measured per cell; at least one iteration runs (default 2)"
    );
    assert_eq!(
        help("calib_data").unwrap(),
        "INT8 calibration data: images, .npy/.npz, or synthetic:SEED (default synthetic:0)"
    );
}

/// Every flag sets the plan-file key of its name, and its value reaches the plan.
#[test]
fn every_flag_is_a_plan_file_key() {
    use clap::Args;
    let command = SettingFlags::augment_args(clap::Command::new("bench"));
    let keys = serde_json::to_value(PlanFile::default()).unwrap();
    let keys = keys.as_object().unwrap();
    let mut flags = 0;
    for arg in command.get_arguments() {
        assert!(keys.contains_key(arg.get_id().as_str()), "{}", arg.get_id());
        flags += 1;
    }
    assert_eq!(
        flags,
        keys.len() - 3,
        "all but the grouped keys have a flag"
    );
    let parsed = SettingFlags::augment_args(clap::Command::new("bench").no_binary_name(true))
        .try_get_matches_from(["--warmup", "7", "--compare", "--targets", "ort-cpu,trt"])
        .unwrap();
    let flags = <SettingFlags as clap::FromArgMatches>::from_arg_matches(&parsed).unwrap();
    let file = flags.plan_file();
    assert_eq!(file.warmup, Some(7));
    assert_eq!(file.compare, Some(true));
    assert_eq!(file.targets, Some(vec![Target::OrtCpu, Target::Trt]));
    assert_eq!(file.duration, None);
}
