//! The run that keeps everything: every source of a comparison in windowed over the same
//! inputs, with the inputs and every source's outputs kept whole, for callers that need the
//! tensors themselves (a comparison counts its metrics window by window instead).

use super::run::{RunConfig, Runs};
use super::windowed::{run_windowed, Layout, Window, WindowSink};
use crate::backend::batch_runner::join_on;
use crate::progress::Progress;
use crate::tensor::{BatchAxes, HostTensor};
use anyhow::Result;

/// Keeps every window's tensors, to join them once the run is over.
#[derive(Default)]
struct Collect {
    inputs: Vec<Vec<HostTensor>>,
    outputs: Vec<Vec<Vec<HostTensor>>>,
    input_axes: BatchAxes,
    output_axes: Vec<BatchAxes>,
}

impl WindowSink for Collect {
    fn add(&mut self, window: &Window, layout: &Layout) -> Result<()> {
        if self.outputs.is_empty() {
            self.outputs = vec![vec![]; window.outputs.len()];
            self.input_axes = layout.inputs.clone();
            self.output_axes = layout.outputs.clone();
        }
        self.inputs.push(window.inputs.to_vec());
        for (kept, outputs) in self.outputs.iter_mut().zip(window.outputs) {
            kept.push(outputs.clone());
        }
        Ok(())
    }
}

/// Runs every source of `config` on the same inputs ([`run_windowed`]) and keeps everything:
/// the inputs and every source's outputs, whole. For callers that need the tensors themselves;
/// a comparison counts its metrics window by window instead.
pub(crate) fn run_sources(config: &RunConfig, progress: &dyn Progress) -> Result<Runs> {
    let mut kept = Collect::default();
    let ran = run_windowed(config, progress, &mut kept)?;
    let Collect {
        inputs,
        outputs,
        input_axes,
        output_axes,
    } = kept;
    let mut results = ran.sides;
    for ((result, parts), axes) in results.iter_mut().zip(outputs).zip(&output_axes) {
        result.outputs = join_on(parts, axes)?;
    }
    Ok(Runs {
        inputs: match ran.fed {
            true => Some(join_on(inputs, &input_axes)?),
            false => None,
        },
        inputs_note: ran.inputs_note,
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::super::inputs::InputSource;
    use super::super::run::RunResult;
    use super::super::sources::{SideConfig, SourceConfig};
    use super::*;
    use crate::backend::select::{BackendKind, BackendOptions};
    use crate::data::synthetic::{InputDistribution, RandomInputs};
    use crate::onnx::rewrite::capture::Capture;
    use crate::onnx::OnnxModel;
    use crate::progress::NoProgress;
    use std::path::Path;
    use std::sync::Arc;

    fn side(path: &Path) -> SideConfig {
        SideConfig {
            path: path.to_path_buf(),
            backend: BackendOptions {
                kind: BackendKind::Tract,
                ..Default::default()
            },
        }
    }

    fn config(sources: Vec<SourceConfig>) -> RunConfig {
        RunConfig {
            sources,
            input_shapes: Default::default(),
            batch_size: None,
            inputs: InputSource::Random {
                random: RandomInputs {
                    dist: InputDistribution::Uniform {
                        low: 0.0,
                        high: 1.0,
                    },
                    seed: 5,
                },
                int_inputs: Default::default(),
                samples: 3,
            },
        }
    }

    #[test]
    fn sources_run_on_the_same_inputs_and_a_pass_changes_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.onnx");
        let proto = crate::onnx::test_models::classifier(None);
        OnnxModel::from_proto(proto, &path).save(&path).unwrap();
        let mut captured = SourceConfig::new("B", side(&path));
        captured.passes.push(Arc::new(Capture {
            names: vec!["relu_out".into()],
        }));
        let runs = run_sources(
            &config(vec![SourceConfig::new("A", side(&path)), captured]),
            &NoProgress,
        )
        .unwrap();
        assert_eq!(runs.inputs.as_ref().unwrap()[0].shape[0], 3);
        let names =
            |r: &RunResult| -> Vec<String> { r.outputs.iter().map(|t| t.name.clone()).collect() };
        assert_eq!(names(&runs.results[0]), ["logits"]);
        assert_eq!(names(&runs.results[1]), ["logits", "relu_out"]);
        assert_eq!(runs.results[0].outputs[0], runs.results[1].outputs[0]);
        assert_eq!((runs.results[1].samples, runs.results[1].batch), (3, 3));

        // Saved outputs take no passes: refused before anything runs.
        let saved = dir.path().join("saved.npz");
        runs.results[0].save(&saved).unwrap();
        let mut bad = SourceConfig::new("S", side(&saved));
        bad.passes.push(Arc::new(Capture { names: vec![] }));
        let err = run_sources(&config(vec![bad]), &NoProgress).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            format!(
                "{}: graph passes (capture) apply to ONNX models only",
                saved.display()
            )
        );
        let back = RunResult::load("S", &saved).unwrap();
        assert_eq!(back.outputs, runs.results[0].outputs);
    }

    #[test]
    fn given_float32_tensors_feed_a_float16_io_graph_converted_and_noted() {
        use crate::onnx::rewrite::fp16::{Fp16, Fp16Options};
        use crate::tensor::{ElemType, TensorData};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.onnx");
        let proto = crate::onnx::test_models::classifier(None);
        OnnxModel::from_proto(proto, &path).save(&path).unwrap();
        let mut narrow = SourceConfig::new("A", side(&path));
        narrow.passes.push(Arc::new(Fp16(Fp16Options {
            fp16_io: true,
            ..Default::default()
        })));
        let n = 2 * 3 * 16 * 16;
        let values = (0..n).map(|i| (i % 17) as f32 / 17.0).collect();
        let x = HostTensor::new("input", vec![2, 3, 16, 16], TensorData::F32(values)).unwrap();
        let mut cfg = config(vec![narrow, SourceConfig::new("B", side(&path))]);
        cfg.inputs = InputSource::Given {
            tensors: vec![x.clone()],
            note: "2 images of val".into(),
        };
        let runs = run_sources(&cfg, &NoProgress).unwrap();
        // The inputs stay as given; only A's run took them as float16.
        assert_eq!(runs.inputs.as_deref(), Some(&[x][..]));
        assert_eq!(
            runs.results[0].notes,
            ["inputs converted float32 → float16 for A"]
        );
        assert!(runs.results[1].notes.is_empty());
        let (a, b) = (&runs.results[0].outputs[0], &runs.results[1].outputs[0]);
        assert_eq!(
            (a.elem_type(), b.elem_type()),
            (ElemType::F16, ElemType::F32)
        );
        let (a, b) = (a.data.to_f64(), b.data.to_f64());
        assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 0.05));
    }
}
