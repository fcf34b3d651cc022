//! The settings of a bench run.

#[cfg(test)]
mod tests {
    use super::super::plan::CellSettings;
    use super::super::target::Target;
    use crate::data::preprocess::PreprocessRequest;
    use std::path::PathBuf;

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
}
