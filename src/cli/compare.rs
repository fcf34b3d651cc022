//! `trtkit compare A B`: run the same inputs through two things that produce outputs (an ONNX
//! model on a reference backend, or an `.npz` of saved outputs) and report how close A is to
//! the reference B.

use super::UsageError;
use crate::backend::select::{open, BackendKind, BackendOptions};
use crate::backend::Device;
use crate::data::batch::{concat, slice_padded, truncate};
use crate::data::npz;
use crate::data::synthetic::{InputDistribution, RandomInputs};
use crate::metrics::closeness::Tolerance;
use crate::metrics::compare::{compare_outputs, OutputComparison};
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::shape::{model_inputs, parse_input_shapes, InputShapes};
use crate::onnx::OnnxModel;
use crate::report::format::json;
use crate::report::table::Table;
use crate::tensor::Dim;
use crate::tensor::{HostTensor, IoSpec};
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Flags of `compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The side under test: an .onnx model, or an .npz of saved outputs.
    pub a: PathBuf,
    /// The reference: an .onnx model, or an .npz of saved outputs.
    pub b: PathBuf,
    /// Backend for both sides (each side's own flag wins).
    #[arg(long, value_enum, default_value_t = BackendKind::Tract)]
    pub backend: BackendKind,
    /// Backend for A.
    #[arg(long, value_enum)]
    pub a_backend: Option<BackendKind>,
    /// Backend for B.
    #[arg(long, value_enum)]
    pub b_backend: Option<BackendKind>,
    /// Device for both sides (each side's own flag wins).
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub device: Device,
    /// Device for A.
    #[arg(long, value_enum)]
    pub a_device: Option<Device>,
    /// Device for B.
    #[arg(long, value_enum)]
    pub b_device: Option<Device>,
    /// CPU threads for both sides (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// CPU threads for A.
    #[arg(long)]
    pub a_threads: Option<usize>,
    /// CPU threads for B.
    #[arg(long)]
    pub b_threads: Option<usize>,
    /// Input shape overrides: `-1 3 224 224`, `1x3x224x224` or `name:1x3x224x224` (repeatable).
    #[arg(long = "input-shape", num_args = 1.., allow_hyphen_values = true, value_name = "DIMS")]
    pub input_shape: Vec<String>,
    /// Samples per inference (default: the model's fixed batch, else up to 32).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Inputs from an .npz (arrays named after the model inputs) or .npy (one-input models).
    #[arg(long, value_name = "FILE")]
    pub inputs: Option<PathBuf>,
    /// Number of random samples (when no --inputs).
    #[arg(long, default_value_t = 64)]
    pub num_inputs: usize,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Draw random inputs from a normal distribution instead of a uniform one.
    #[arg(long)]
    pub normal: bool,
    /// Uniform range LOW HIGH, or normal MEAN STD with --normal.
    #[arg(long, num_args = 2, allow_hyphen_values = true, value_names = ["LOW", "HIGH"], default_values_t = [0.0, 1.0])]
    pub range: Vec<f64>,
    /// Relative tolerance of isclose (times |B|).
    #[arg(long, default_value_t = 1e-3)]
    pub rtol: f64,
    /// Absolute tolerance of isclose.
    #[arg(long, default_value_t = 1e-8)]
    pub atol: f64,
    /// NaN on both sides counts as equal.
    #[arg(long)]
    pub equal_nan: bool,
    /// Ranks in the top-k table of [batch, classes] outputs.
    #[arg(long, default_value_t = 10)]
    pub topk: usize,
    /// Fail (exit 1) when any output's equality % or top-1 agreement % is below PCT.
    #[arg(long, value_name = "PCT")]
    pub fail_below: Option<f64>,
    /// Save the inputs used as .npz.
    #[arg(long, value_name = "FILE")]
    pub save_inputs: Option<PathBuf>,
    /// Save A's outputs as .npz.
    #[arg(long, value_name = "FILE")]
    pub save_outputs: Option<PathBuf>,
    /// Save B's outputs as .npz.
    #[arg(long, value_name = "FILE")]
    pub save_reference: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the tables as markdown.
    #[arg(long)]
    pub markdown: bool,
}

/// One side of the comparison, as reported.
#[derive(Clone, Debug, Serialize)]
pub struct SideReport {
    /// `A` or `B`.
    pub label: String,
    /// The file.
    pub source: String,
    /// Backend name, or `saved outputs`.
    pub backend: String,
    /// Samples run (0 for saved outputs).
    pub samples: usize,
    /// Batch size per inference (0 for saved outputs).
    pub batch: usize,
    /// Inference time summed over batches, seconds.
    pub inference_s: f64,
    /// Samples per second of inference time.
    pub samples_per_s: f64,
}

/// Everything `compare` found.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    /// A (under test) and B (reference).
    pub sides: Vec<SideReport>,
    /// Where the inputs came from.
    pub inputs: String,
    /// Tolerances used.
    pub tolerance: Tolerance,
    /// One entry per output.
    pub outputs: Vec<OutputComparison>,
}

enum Source {
    Model(Box<(OnnxModel, BackendOptions)>),
    Saved(Vec<HostTensor>),
}

fn is_model(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "onnx")
}

fn source(path: &Path, options: BackendOptions) -> Result<Source> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("onnx") => Ok(Source::Model(Box::new((OnnxModel::load(path)?, options)))),
        Some("npz") | Some("npy") => Ok(Source::Saved(npz::load(path)?)),
        _ => Err(UsageError(format!(
            "{}: expected an .onnx model or an .npz of saved outputs",
            path.display()
        ))
        .into()),
    }
}

/// The batch every input of `model` is fixed to, if any.
fn fixed_batch(model: &OnnxModel) -> Option<usize> {
    let inputs = model_inputs(model);
    let mut sizes = inputs.iter().map(|i| match i.dims.as_ref()?.first()? {
        Dim::Fixed(n) => Some(*n as usize),
        _ => None,
    });
    let first = sizes.next()??;
    sizes.all(|s| s == Some(first)).then_some(first)
}

fn load_inputs(path: &Path, specs: &[IoSpec]) -> Result<Vec<HostTensor>> {
    let mut arrays = npz::load(path)?;
    if arrays.len() == 1 && specs.len() == 1 && path.extension().is_some_and(|e| e == "npy") {
        arrays[0].name = specs[0].name.clone();
    }
    specs
        .iter()
        .map(|s| {
            let t = arrays.iter().find(|t| t.name == s.name).with_context(|| {
                let names: Vec<&str> = arrays.iter().map(|t| t.name.as_str()).collect();
                format!(
                    "{}: has no array for input '{}' (it has: {})",
                    path.display(),
                    s.name,
                    names.join(", ")
                )
            })?;
            if t.elem_type() != s.elem_type {
                bail!(
                    "{}: input '{}' is {}, the model takes {}",
                    path.display(),
                    s.name,
                    t.elem_type(),
                    s.elem_type
                );
            }
            Ok(t.clone())
        })
        .collect()
}

fn samples_of(inputs: &[HostTensor]) -> Result<usize> {
    let n = inputs
        .first()
        .and_then(|t| t.shape.first().copied())
        .context("the inputs have no batch axis")?;
    for t in inputs {
        if t.shape.first() != Some(&n) {
            bail!(
                "input '{}' has shape {:?}, but the other inputs have {n} samples",
                t.name,
                t.shape
            );
        }
    }
    if n == 0 {
        bail!("the inputs have 0 samples");
    }
    Ok(n)
}

fn run_model(
    label: &str,
    path: &Path,
    backend: &mut dyn crate::backend::Backend,
    inputs: &[HostTensor],
    batch: usize,
) -> Result<(Vec<HostTensor>, SideReport)> {
    let samples = samples_of(inputs)?;
    let bar = indicatif::ProgressBar::new(samples as u64)
        .with_message(format!("{label}: {}", backend.name()));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} samples")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut parts: Vec<Vec<HostTensor>> = Vec::new();
    let mut total = Duration::ZERO;
    let mut start = 0;
    while start < samples {
        let take = batch.min(samples - start);
        let chunk = inputs
            .iter()
            .map(|t| slice_padded(t, start, batch))
            .collect::<Result<Vec<_>>>()?;
        let out = backend.run(&chunk).with_context(|| {
            format!(
                "{}: {} failed on samples {start}..{}",
                path.display(),
                backend.name(),
                start + take
            )
        })?;
        total += out.elapsed;
        let kept = out
            .outputs
            .into_iter()
            .map(|t| {
                if take < batch {
                    truncate(t, take)
                } else {
                    Ok(t)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        parts.push(kept);
        start += take;
        bar.inc(take as u64);
    }
    bar.finish_and_clear();
    let n_out = parts[0].len();
    let mut outputs = Vec::with_capacity(n_out);
    for i in 0..n_out {
        let pieces = parts.iter().map(|p| p[i].clone()).collect::<Vec<_>>();
        outputs.push(if pieces.len() == 1 {
            pieces.into_iter().next().expect("one piece")
        } else {
            concat(pieces)?
        });
    }
    let secs = total.as_secs_f64();
    Ok((
        outputs,
        SideReport {
            label: label.into(),
            source: path.display().to_string(),
            backend: backend.name(),
            samples,
            batch,
            inference_s: secs,
            samples_per_s: if secs > 0.0 {
                samples as f64 / secs
            } else {
                0.0
            },
        },
    ))
}

/// Runs the comparison and returns the report (nothing printed).
pub fn compare(args: &CompareArgs) -> Result<CompareReport> {
    let shapes = parse_input_shapes(&args.input_shape).map_err(|e| UsageError(format!("{e:#}")))?;
    if args.batch == Some(0) {
        return Err(UsageError("--batch must be at least 1".into()).into());
    }
    let side_options = |backend: Option<BackendKind>,
                        device: Option<Device>,
                        threads: Option<usize>| BackendOptions {
        kind: backend.unwrap_or(args.backend),
        device: device.unwrap_or(args.device),
        threads: threads.or(args.threads),
        input_shapes: vec![],
        batch: None,
    };
    let mut sources = [
        source(
            &args.a,
            side_options(args.a_backend, args.a_device, args.a_threads),
        )?,
        source(
            &args.b,
            side_options(args.b_backend, args.b_device, args.b_threads),
        )?,
    ];
    // Shape overrides and the batch, decided once from the first model and used on both.
    let mut batch = args.batch;
    let mut dynamic = [false; 2];
    for (i, (src, path)) in sources.iter_mut().zip([&args.a, &args.b]).enumerate() {
        if let Source::Model(boxed) = src {
            let model = &mut boxed.0;
            if !shapes.is_empty() {
                *model = InputShapes(shapes.clone()).run(model.clone())?.0;
            }
            match (fixed_batch(model), batch) {
                (Some(f), Some(b)) if f != b => bail!(
                    "{}: the model's batch is fixed to {f}, --batch {b} cannot apply (use --input-shape -1 ... to make it dynamic)",
                    path.display()
                ),
                (Some(f), _) => batch = Some(f),
                (None, _) => dynamic[i] = true,
            }
        }
    }
    let mut backends = Vec::new();
    let mut inputs: Option<Vec<HostTensor>> = None;
    let mut input_note = "none (both sides are saved outputs)".to_string();
    let mut outputs: Vec<(Vec<HostTensor>, SideReport)> = Vec::new();
    for (i, (src, path)) in sources.iter_mut().zip([&args.a, &args.b]).enumerate() {
        let label = ["A", "B"][i];
        match src {
            Source::Saved(tensors) => outputs.push((
                std::mem::take(tensors),
                SideReport {
                    label: label.into(),
                    source: path.display().to_string(),
                    backend: "saved outputs".into(),
                    samples: 0,
                    batch: 0,
                    inference_s: 0.0,
                    samples_per_s: 0.0,
                },
            )),
            Source::Model(boxed) => {
                let (model, opts) = &mut **boxed;
                if inputs.is_none() {
                    // Inputs first: their count decides the batch of a dynamic model.
                    let probe = declared_inputs(model)?;
                    let made = match &args.inputs {
                        Some(p) => {
                            input_note = p.display().to_string();
                            load_inputs(p, &probe)?
                        }
                        None => {
                            if args.num_inputs == 0 {
                                return Err(
                                    UsageError("--num-inputs must be at least 1".into()).into()
                                );
                            }
                            let r = random_inputs(args)?;
                            input_note = describe(&r, args.num_inputs);
                            r.generate(&probe, args.num_inputs).with_context(|| {
                                format!("{}: cannot make inputs", path.display())
                            })?
                        }
                    };
                    let n = samples_of(&made)?;
                    batch = Some(batch.unwrap_or(n.min(32)));
                    inputs = Some(made);
                }
                if dynamic[i] {
                    opts.batch = batch;
                }
                let mut backend = open(model, opts)?;
                let (outs, side) = run_model(
                    label,
                    path,
                    backend.as_mut(),
                    inputs.as_ref().expect("inputs made above"),
                    batch.expect("batch decided above"),
                )?;
                backends.push(backend.name());
                outputs.push((outs, side));
            }
        }
    }
    if let (Some(p), Some(inp)) = (&args.save_inputs, &inputs) {
        npz::save(p, inp)?;
    }
    if let Some(p) = &args.save_outputs {
        npz::save(p, &outputs[0].0)?;
    }
    if let Some(p) = &args.save_reference {
        npz::save(p, &outputs[1].0)?;
    }
    let tolerance = Tolerance {
        rtol: args.rtol,
        atol: args.atol,
        equal_nan: args.equal_nan,
    };
    let compared = compare_outputs(&outputs[0].0, &outputs[1].0, &tolerance, args.topk)
        .with_context(|| format!("{} vs {}", args.a.display(), args.b.display()))?;
    Ok(CompareReport {
        sides: outputs.into_iter().map(|(_, s)| s).collect(),
        inputs: input_note,
        tolerance,
        outputs: compared,
    })
}

/// The inputs `model` declares (names, dtypes, dims), read without preparing it.
fn declared_inputs(model: &OnnxModel) -> Result<Vec<IoSpec>> {
    model_inputs(model)
        .into_iter()
        .map(|i| {
            let elem_type = crate::onnx::dtype::elem_type(i.dtype_code).with_context(|| {
                format!(
                    "{}: input '{}' is {}, which trtkit cannot feed",
                    model.path.display(),
                    i.name,
                    i.dtype
                )
            })?;
            let dims = i.dims.with_context(|| {
                format!(
                    "{}: input '{}' declares no shape; give it with --input-shape",
                    model.path.display(),
                    i.name
                )
            })?;
            Ok(IoSpec {
                name: i.name,
                elem_type,
                dims,
            })
        })
        .collect()
}

fn random_inputs(args: &CompareArgs) -> Result<RandomInputs> {
    let (x, y) = (args.range[0], args.range[1]);
    let dist = if args.normal {
        InputDistribution::Normal { mean: x, std: y }
    } else {
        InputDistribution::Uniform { low: x, high: y }
    };
    Ok(RandomInputs {
        dist,
        seed: args.seed,
    })
}

fn describe(r: &RandomInputs, n: usize) -> String {
    match r.dist {
        InputDistribution::Uniform { low, high } => {
            format!(
                "{n} random samples, uniform [{low}, {high}), seed {}",
                r.seed
            )
        }
        InputDistribution::Normal { mean, std } => {
            format!(
                "{n} random samples, normal(mean {mean}, std {std}), seed {}",
                r.seed
            )
        }
    }
}

fn num(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() >= 1e-3 && x.abs() < 1e4 {
        format!("{x:.6}")
    } else {
        format!("{x:.3e}")
    }
}

/// The tables of a report, for the terminal or as markdown.
pub fn render(r: &CompareReport, markdown: bool) -> String {
    let show = |t: &Table| {
        if markdown {
            t.render_markdown()
        } else {
            t.render()
        }
    };
    let mut sides = Table::new(&[
        "side",
        "source",
        "backend",
        "samples",
        "batch",
        "inference s",
        "samples/s",
    ]);
    for s in &r.sides {
        let ran = s.samples > 0;
        sides.row(vec![
            s.label.clone(),
            s.source.clone(),
            s.backend.clone(),
            if ran {
                s.samples.to_string()
            } else {
                "-".into()
            },
            if ran { s.batch.to_string() } else { "-".into() },
            if ran {
                format!("{:.3}", s.inference_s)
            } else {
                "-".into()
            },
            if ran {
                format!("{:.1}", s.samples_per_s)
            } else {
                "-".into()
            },
        ]);
    }
    let mut out = show(&sides);
    out += &format!(
        "\ninputs: {}\nisclose: |A - B| <= {} + {} * |B|{}\n\n",
        r.inputs,
        r.tolerance.atol,
        r.tolerance.rtol,
        if r.tolerance.equal_nan {
            ", NaN == NaN"
        } else {
            ""
        }
    );
    let mut t = Table::new(&[
        "output",
        "shape",
        "equal %",
        "all-close samples %",
        "max abs err",
        "max rel err",
        "mean abs err",
        "cosine",
        "NaN A/B",
        "Inf A/B",
    ]);
    for o in &r.outputs {
        let c = &o.closeness;
        t.row(vec![
            o.name.clone(),
            o.shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("×"),
            format!("{:.2}", c.equal_pct),
            format!("{:.2}", c.all_close_samples_pct),
            num(c.max_abs_err),
            num(c.max_rel_err),
            num(c.mean_abs_err),
            format!("{:.6}", c.cosine),
            format!("{}/{}", c.nan_a, c.nan_b),
            format!("{}/{}", c.inf_a, c.inf_b),
        ]);
    }
    out += &show(&t);
    for o in &r.outputs {
        let Some(k) = &o.topk else { continue };
        out += &format!(
            "\ntop-{} of '{}' (ranks ordered by B, {} samples × {} classes); top-1 agreement {:.2}%\n\n",
            k.ranks.len(),
            o.name,
            k.samples,
            k.classes,
            k.top1_agreement_pct
        );
        let mut t = Table::new(&["rank", "MAE", "disagreement %"]);
        for row in &k.ranks {
            t.row(vec![
                row.rank.to_string(),
                num(row.mae),
                format!("{:.2}", row.disagreement_pct),
            ]);
        }
        out += &show(&t);
    }
    out
}

/// What makes the run fail after the report is printed: all-NaN outputs and `--fail-below`.
pub fn verdict(r: &CompareReport, fail_below: Option<f64>) -> Result<()> {
    for o in &r.outputs {
        for (side, a) in [("A", true), ("B", false)] {
            if o.all_nan(a) {
                bail!(
                    "output '{}' of {side} is all NaN: that run is broken",
                    o.name
                );
            }
        }
    }
    if let Some(pct) = fail_below {
        for o in &r.outputs {
            if o.closeness.equal_pct < pct {
                bail!(
                    "output '{}': equality {:.2}% is below --fail-below {pct}",
                    o.name,
                    o.closeness.equal_pct
                );
            }
            if let Some(k) = &o.topk {
                if k.top1_agreement_pct < pct {
                    bail!(
                        "output '{}': top-1 agreement {:.2}% is below --fail-below {pct}",
                        o.name,
                        k.top1_agreement_pct
                    );
                }
            }
        }
    }
    Ok(())
}

/// Runs `compare`: prints the report, then fails on all-NaN outputs or `--fail-below`.
pub fn run(args: CompareArgs) -> Result<()> {
    if !is_model(&args.a) && !is_model(&args.b) && args.inputs.is_some() {
        tracing::warn!("--inputs is ignored: both sides are saved outputs");
    }
    let report = compare(&args)?;
    let text = if args.json {
        json(&report)?
    } else {
        render(&report, args.markdown)
    };
    print!("{text}");
    verdict(&report, args.fail_below)
}
