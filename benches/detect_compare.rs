//! What `compare --task detect` adds to a comparison: decoding, class-aware NMS and matching of
//! 64 images of a 6,300-anchor YOLO-style head (`[64, 6300, 85]`, 80 classes, 320×320 input),
//! beside the time the two models take on ONNX Runtime's CPU build in the same run. Prints
//! both and their ratio for three runs. `cargo bench --bench detect_compare` (needs
//! `pip install onnxruntime`).

use std::time::Instant;
use trtkit::backend::mac_count::model_macs;
use trtkit::backend::select::{BackendKind, BackendOptions};
use trtkit::data::synthetic::{InputDistribution, RandomInputs};
use trtkit::jobs::compare::{compare, CompareConfig, InputSource, Saves, SideConfig};
use trtkit::metrics::task::{Task, TaskRequest};
use trtkit::onnx::test_models::{yolo_head, YoloStyle};
use trtkit::onnx::OnnxModel;
use trtkit::progress::NoProgress;

const SAMPLES: usize = 64;

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("yolo320.onnx");
    let model = OnnxModel::from_proto(yolo_head(YoloStyle::V5, 320, 80, None), &path);
    model.save(&path)?;
    let macs = model_macs(&model, &Default::default())?.total;
    let side = SideConfig {
        path: path.clone(),
        backend: BackendOptions {
            kind: BackendKind::Ort,
            ..Default::default()
        },
    };
    let config = CompareConfig {
        a: side.clone(),
        b: side,
        input_shapes: Default::default(),
        batch_size: None,
        inputs: InputSource::Random {
            random: RandomInputs {
                dist: InputDistribution::Uniform {
                    low: 0.0,
                    high: 1.0,
                },
                seed: 0,
            },
            int_inputs: Default::default(),
            samples: SAMPLES,
        },
        tolerance: Default::default(),
        topk: 10,
        task: TaskRequest {
            task: Some(Task::Detect),
            ..Default::default()
        },
    };
    println!(
        "{SAMPLES} images, [{SAMPLES}, 6300, 85] head, {:.2} GMACs per image, ort-cpu, batch 32\n\
         run  models s (A + B)  decode+NMS+match s  ratio   boxes B  wall s",
        macs as f64 / 1e9
    );
    for run in 1..=3 {
        let start = Instant::now();
        let report = compare(&config, &Saves::default(), &NoProgress)?;
        let models: f64 = report.sides.iter().map(|s| s.inference_s).sum();
        let task = report.task.as_ref().expect("task detect was asked for");
        let boxes = task.detect.as_ref().map_or(0, |d| d.agreement.boxes_b);
        println!(
            "{run:>3}  {models:>17.3}  {:>18.4}  {:>5.2}%  {boxes:>7}  {:>6.2}",
            task.seconds,
            100.0 * task.seconds / models,
            start.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
