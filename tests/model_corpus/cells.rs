//! The commands run on each model of the corpus, in order, each in the model's own folder.

use super::outcome::{classify, Outcome};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use trtkit::onnx::pb::tensor_shape_proto::dimension::Value as DimValue;
use trtkit::onnx::pb::type_proto::Value as TypeValue;

/// The commands, in the order of the table's columns.
pub const COMMANDS: &[&str] = &[
    "inspect",
    "run",
    "compare",
    "fp16",
    "compare-fp16",
    "calibrate",
    "int8",
    "compare-int8",
    "layerwise",
    "build",
];

/// Longest a single command may take before it counts as a raw error.
const CELL_TIMEOUT: Duration = Duration::from_secs(450);

/// One model of the manifest.
pub struct Model {
    /// The manifest's name (the file is `<name>.onnx` in the corpus folder).
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// The manifest's `--input-shape` values (empty for none).
    pub shapes: Vec<String>,
}

/// One command's result on one model.
pub struct Cell {
    /// The outcome.
    pub outcome: Outcome,
    /// Wall time of the command (zero when not run).
    pub seconds: f64,
    /// The first line of its stderr, the corpus folder left out (empty when it succeeded).
    pub first_line: String,
}

/// Reads the manifest's models that are in `corpus`.
pub fn read_manifest(manifest: &str, corpus: &Path) -> Vec<Model> {
    manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            let shapes = match cols[7] {
                "-" => vec![],
                s => s.split(' ').map(String::from).collect(),
            };
            Model {
                name: cols[0].to_string(),
                path: corpus.join(format!("{}.onnx", cols[0])),
                shapes,
            }
        })
        .collect()
}

/// What the harness needs to know of a model's declared inputs.
struct Inputs {
    /// A float input shaped `[N,3,H,W]` or `[N,H,W,3]`.
    image_like: bool,
    /// The first input's first axis is a fixed size.
    static_batch: bool,
}

fn declared_inputs(path: &Path) -> Inputs {
    let proto = trtkit::onnx::model::decode_model(&std::fs::read(path).unwrap()).unwrap();
    let graph = proto.graph.unwrap_or_default();
    let weights: Vec<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let mut inputs = graph
        .input
        .iter()
        .filter(|v| !weights.contains(&v.name.as_str()));
    let shape_of = |v: &trtkit::onnx::pb::ValueInfoProto| -> (i32, Vec<Option<i64>>) {
        match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(TypeValue::TensorType(t)) => {
                let dims = t.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or(&[]);
                let dims = dims.iter().map(|d| match d.value {
                    Some(DimValue::DimValue(n)) if n > 0 => Some(n),
                    _ => None,
                });
                (t.elem_type, dims.collect())
            }
            None => (0, vec![]),
        }
    };
    let first = inputs.clone().next().map(shape_of).unwrap_or((0, vec![]));
    let image_like = inputs.any(|v| {
        let (elem, dims) = shape_of(v);
        elem == 1 && dims.len() == 4 && (dims[1] == Some(3) || dims[3] == Some(3))
    });
    Inputs {
        image_like,
        static_batch: first.1.first().is_some_and(Option::is_some),
    }
}

/// Whether `trtkit inspect` takes `--input-shape`.
pub fn inspect_takes_shapes() -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .args(["inspect", "--help"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("--input-shape")
}

/// TensorRT-RTX's folder, looked up once.
fn tensorrt_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(super::support::tensorrt_dir)
}

/// Runs trtkit in `dir` with `args`; `files` are the model files a refusal must name.
fn trtkit(dir: &Path, args: &[&str], files: &[&str]) -> Cell {
    let log = |n: &str| std::fs::File::create(dir.join(n)).unwrap();
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .current_dir(dir)
        .args(args)
        .env("TRTKIT_TENSORRT_DIR", tensorrt_dir())
        .stdout(Stdio::from(log("stdout.txt")))
        .stderr(Stdio::from(log("stderr.txt")))
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > CELL_TIMEOUT {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let seconds = start.elapsed().as_secs_f64();
    let stderr = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
    let outcome = classify(status, &stderr, files);
    let first_line = match outcome {
        Outcome::Ok => String::new(),
        _ => stderr.lines().next().unwrap_or("").to_string(),
    };
    Cell {
        outcome,
        seconds,
        first_line,
    }
}

/// `head` then `tail`.
fn with<'a>(head: &[&'a str], tail: &[&'a str]) -> Vec<&'a str> {
    [head, tail].concat()
}

fn not_run(why: &'static str) -> Cell {
    Cell {
        outcome: Outcome::NotRun(why),
        seconds: 0.0,
        first_line: String::new(),
    }
}

/// Runs every command of [`COMMANDS`] on `model` in the empty folder `dir`, in that order.
pub fn run_model(model: &Model, dir: &Path, inspect_shapes: bool) -> Vec<Cell> {
    let facts = declared_inputs(&model.path);
    let m = model.path.to_str().unwrap();
    let file = model.path.file_name().unwrap().to_str().unwrap();
    let mut shape: Vec<&str> = vec![];
    if !model.shapes.is_empty() {
        shape.push("--input-shape");
        shape.extend(model.shapes.iter().map(String::as_str));
    }
    let samples = ["--num-samples", "4", "--batch-size", "1"];
    let run = |args: Vec<&str>, files: &[&str]| trtkit(dir, &args, files);
    let compare = |a: &str| {
        run(
            with(&with(&["compare", a, m], &samples), &shape),
            &[file, a],
        )
    };

    let inspect_shape = if inspect_shapes { &shape[..] } else { &[] };
    let mut cells = vec![run(with(&["inspect", m], inspect_shape), &[file])];
    cells.push(run(
        with(
            &[
                "run",
                m,
                "--batch-size",
                "1",
                "--warmup",
                "1",
                "--iterations",
                "3",
            ],
            &shape,
        ),
        &[file],
    ));
    cells.push(compare(m));
    cells.push(run(
        vec!["quantize", m, "--fp16", "-o", "fp16.onnx"],
        &[file],
    ));
    let fp16 = dir.join("fp16.onnx").exists();
    cells.push(if fp16 {
        compare("fp16.onnx")
    } else {
        not_run("no fp16 model")
    });
    cells.extend(int8_cells(dir, m, file, &shape, facts.image_like, &compare));
    cells.push(if fp16 {
        let head = [
            "compare",
            "--layerwise",
            "fp16.onnx",
            m,
            "--num-samples",
            "2",
        ];
        run(
            with(&with(&head, &["--batch-size", "1"]), &shape),
            &[file, "fp16.onnx"],
        )
    } else {
        not_run("no fp16 model")
    });
    let batch: &[&str] = if facts.static_batch {
        &[]
    } else {
        &["--min-batch", "1", "--opt-batch", "1", "--max-batch", "2"]
    };
    cells.push(run(
        with(
            &with(&["build", m, "--engine-dir", "engines"], &shape),
            batch,
        ),
        &[file],
    ));
    cells
}

/// `calibrate`, `quantize --int8` and `compare` of the INT8 model, for image-like models.
fn int8_cells(
    dir: &Path,
    m: &str,
    file: &str,
    shape: &[&str],
    image_like: bool,
    compare: &dyn Fn(&str) -> Cell,
) -> Vec<Cell> {
    if !image_like {
        return (0..3).map(|_| not_run("not image-like")).collect();
    }
    let head = [
        "calibrate",
        m,
        "--calib-data",
        "synthetic:0",
        "--num-samples",
        "4",
    ];
    let tail = ["--batch-size", "1", "--cache-dir", "cal", "--json"];
    let args = [&head[..], &tail, shape].concat();
    let calibrate = trtkit(dir, &args, &[file]);
    let cache = (calibrate.outcome == Outcome::Ok)
        .then(|| std::fs::read_to_string(dir.join("stdout.txt")).unwrap())
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| v["caches"][0]["cache"].as_str().map(String::from));
    let Some(cache) = cache else {
        return vec![calibrate, not_run("no cache"), not_run("no cache")];
    };
    let args = [
        "quantize",
        m,
        "--int8",
        "--calibration-cache",
        &cache,
        "-o",
        "int8.onnx",
    ];
    let int8 = trtkit(dir, &args, &[file]);
    let compared = if dir.join("int8.onnx").exists() {
        compare("int8.onnx")
    } else {
        not_run("no int8 model")
    };
    vec![calibrate, int8, compared]
}
