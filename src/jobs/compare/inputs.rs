//! The inputs every source of a comparison runs on: seeded random samples drawn window by
//! window, arrays from an `.npz`/`.npy`, the preprocessed images of a folder, or tensors given in
//! memory (a preprocessed dataset, the inputs of an earlier run); and the batch they run at.

use crate::backend::batch_memory::{check_host, specs_sample_bytes};
use crate::backend::batch_runner::{axis_of, samples_on_axes};
use crate::data::batch_axis::slice_padded_on;
use crate::data::npz;
use crate::data::random_window::RandomWindows;
use crate::data::synthetic::{InputDistribution, RandomInputs};
use crate::error::Setting;
use crate::jobs::validate::{folder_tensor, ValidateConfig};
use crate::tensor::{feeds, BatchAxes, HostTensor, IntInput, IoSpec};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most samples per inference when neither the caller nor the model sets the batch.
pub(crate) const DEFAULT_BATCH: usize = 32;

/// Where the inputs come from.
#[derive(Clone, Debug)]
pub enum InputSource {
    /// An `.npz` with one array per model input (or an `.npy` for a one-input model).
    File(PathBuf),
    /// `samples` random samples.
    Random {
        /// The distribution and seed.
        random: RandomInputs,
        /// Values of integer inputs given by hand (`--int-range`), over what the graph says.
        int_inputs: BTreeMap<String, IntInput>,
        /// How many samples.
        samples: usize,
    },
    /// The images of a folder, decoded and preprocessed for the model's image input by the
    /// dataset loader (the model, folder, preprocessing and count as the config says).
    Images(Box<ValidateConfig>),
    /// Tensors already in memory, one per model input (named after it).
    Given {
        /// The tensors.
        tensors: Vec<HostTensor>,
        /// Where they came from, as the report says it.
        note: String,
    },
}

/// The arrays of `arrays` that feed `specs`, by name and element type (a float array feeds any
/// float input: each side converts it to the float type its model takes); `origin` names where
/// they came from in errors.
fn pick_inputs(arrays: &[HostTensor], specs: &[IoSpec], origin: &str) -> Result<Vec<HostTensor>> {
    specs
        .iter()
        .map(|s| {
            let t = arrays.iter().find(|t| t.name == s.name).with_context(|| {
                let names: Vec<&str> = arrays.iter().map(|t| t.name.as_str()).collect();
                format!(
                    "{origin}: has no array for input '{}' (it has: {})",
                    s.name,
                    names.join(", ")
                )
            })?;
            if !feeds(t.elem_type(), s.elem_type) {
                bail!(
                    "{origin}: input '{}' is {}, the model takes {}",
                    s.name,
                    t.elem_type(),
                    s.elem_type
                );
            }
            Ok(t.clone())
        })
        .collect()
}

/// The inputs `specs` asks for, read from `path` (an `.npy` feeds a one-input model whatever
/// its array is called).
pub(crate) fn load_inputs(path: &Path, specs: &[IoSpec]) -> Result<Vec<HostTensor>> {
    let mut arrays = npz::load(path)?;
    if arrays.len() == 1 && specs.len() == 1 && path.extension().is_some_and(|e| e == "npy") {
        arrays[0].name = specs[0].name.clone();
    }
    pick_inputs(&arrays, specs, &path.display().to_string())
}

/// How random inputs are described in the report.
pub fn describe(r: &RandomInputs, n: usize) -> String {
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

/// The inputs of a comparison, handed out window by window: tensors already whole in memory
/// (a file's arrays, given tensors, a folder's images) cut on their batch axes, or random
/// samples drawn window by window, so a run of any length holds one batch of them.
pub(crate) enum Feed {
    /// Whole tensors, batched on `axes`.
    Whole {
        /// The tensors.
        tensors: Vec<HostTensor>,
        /// Where they hold their samples.
        axes: BatchAxes,
    },
    /// Random samples.
    Random {
        /// The draws.
        windows: RandomWindows,
        /// How many samples.
        samples: usize,
        /// The model they are made for (errors name it).
        model: PathBuf,
    },
}

impl Feed {
    /// The number of samples.
    pub fn samples(&self) -> Result<usize> {
        match self {
            Feed::Whole { tensors, axes } => samples_on_axes(tensors, axes),
            Feed::Random { samples, .. } => Ok(*samples),
        }
    }

    /// Samples `start..start + len` of every input.
    pub fn window(&self, start: usize, len: usize) -> Result<Vec<HostTensor>> {
        match self {
            Feed::Whole { tensors, axes } => tensors
                .iter()
                .map(|t| slice_padded_on(t, axis_of(axes, t)?, start, len))
                .collect(),
            Feed::Random { windows, model, .. } => windows
                .window(start, len)
                .with_context(|| format!("{}: cannot make inputs", model.display())),
        }
    }

    /// Every sample of every input, whole.
    pub fn whole(self) -> Result<Vec<HostTensor>> {
        match self {
            Feed::Whole { tensors, .. } => Ok(tensors),
            random => random.window(0, random.samples()?),
        }
    }
}

/// The inputs `source` gives for a model taking `probe`, and how the report describes them.
/// `path` is the model they are made for (errors name it); `graph_roles` are the values its
/// integer inputs take by the graph (token ids, masks), which `--int-range` overrides; `axes`
/// where each input holds its samples (an input with none is drawn once).
pub(crate) fn make_feed(
    source: &InputSource,
    probe: &[IoSpec],
    path: &Path,
    graph_roles: &BTreeMap<String, IntInput>,
    axes: &BatchAxes,
) -> Result<(Feed, String)> {
    let whole = |(tensors, note)| {
        let feed = Feed::Whole {
            tensors,
            axes: axes.clone(),
        };
        Ok((feed, note))
    };
    match source {
        InputSource::File(p) => whole((load_inputs(p, probe)?, p.display().to_string())),
        InputSource::Given { tensors, note } => {
            whole((pick_inputs(tensors, probe, note)?, note.clone()))
        }
        InputSource::Images(images) => {
            let tensor = folder_tensor(images)?;
            let note = format!(
                "{} images of {}, preprocessed for the model",
                tensor.shape[0],
                images.dataset.display()
            );
            whole((pick_inputs(&[tensor], probe, &note)?, note))
        }
        InputSource::Random {
            random,
            int_inputs,
            samples,
        } => {
            if *samples == 0 {
                bail!("at least one random sample is needed");
            }
            // Integer inputs take the values the graph says they take, unless given by hand.
            let mut roles = graph_roles.clone();
            roles.extend(int_inputs.iter().map(|(k, v)| (k.clone(), *v)));
            roles.retain(|name, _| probe.iter().any(|s| &s.name == name));
            let mut note = describe(random, *samples);
            for (name, role) in &roles {
                note.push_str(&format!("; {name}: {role}"));
            }
            let feed = Feed::Random {
                windows: RandomWindows::new(*random, probe, roles, axes),
                samples: *samples,
                model: path.to_path_buf(),
            };
            Ok((feed, note))
        }
    }
}

/// The inputs `source` gives for a model taking `probe`, whole ([`make_feed`]), and how the
/// report describes them; random samples must fit in the host memory left.
pub(crate) fn make_inputs(
    source: &InputSource,
    probe: &[IoSpec],
    path: &Path,
    graph_roles: &BTreeMap<String, IntInput>,
    axes: &BatchAxes,
) -> Result<(Vec<HostTensor>, String)> {
    if let InputSource::Random { samples, .. } = source {
        check_host(Setting::Samples, *samples, specs_sample_bytes(probe))
            .with_context(|| path.display().to_string())?;
    }
    let (feed, note) = make_feed(source, probe, path, graph_roles, axes)?;
    Ok((feed.whole()?, note))
}

/// The batch of a run over `samples` inputs: the one asked for, but a batch beyond the samples
/// runs the samples (no padding to a size nobody needs) unless a model fixes it; up to
/// [`DEFAULT_BATCH`] when none was asked for.
pub(crate) fn batch_for_inputs(asked: Option<usize>, samples: usize, any_fixed: bool) -> usize {
    match asked {
        Some(b) if any_fixed => b,
        Some(b) => b.min(samples),
        None => samples.min(DEFAULT_BATCH),
    }
}

/// The batch of the run over `samples` samples ([`batch_for_inputs`]), checked against the host memory
/// left: a fixed batch pads the samples up to it, so it must fit before anything runs.
/// `asked_by_user` says whether the batch came from the caller (else from a model's fixed
/// batch), for the setting the error names.
pub(crate) fn checked_batch(
    asked: Option<usize>,
    asked_by_user: bool,
    samples: usize,
    any_fixed: bool,
    probe: &[IoSpec],
    path: &Path,
) -> Result<usize> {
    let batch = batch_for_inputs(asked, samples, any_fixed);
    let setting = match (any_fixed, asked_by_user) {
        (true, false) => Setting::InputShape,
        _ => Setting::BatchSize,
    };
    check_host(setting, batch, specs_sample_bytes(probe))
        .with_context(|| path.display().to_string())?;
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{Dim, ElemType, TensorData};

    fn spec(name: &str) -> IoSpec {
        IoSpec {
            name: name.into(),
            elem_type: ElemType::F32,
            dims: vec![Dim::Fixed(2), Dim::Fixed(3)],
        }
    }

    #[test]
    fn given_tensors_are_picked_by_name_and_say_what_is_missing() {
        let t = HostTensor::new("x", vec![2, 3], TensorData::F32(vec![0.5; 6])).unwrap();
        let given = InputSource::Given {
            tensors: vec![t.clone()],
            note: "2 images of val".into(),
        };
        let (made, note) = make_inputs(
            &given,
            &[spec("x")],
            Path::new("m.onnx"),
            &BTreeMap::new(),
            &BatchAxes::default(),
        )
        .unwrap();
        assert_eq!(made, vec![t]);
        assert_eq!(note, "2 images of val");
        let err = make_inputs(
            &given,
            &[spec("y")],
            Path::new("m.onnx"),
            &BTreeMap::new(),
            &BatchAxes::default(),
        )
        .unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "2 images of val: has no array for input 'y' (it has: x)"
        );
    }

    #[test]
    fn a_float_array_feeds_any_float_input_and_an_integer_one_only_its_own_type() {
        let x = HostTensor::new("x", vec![2, 3], TensorData::F32(vec![0.5; 6])).unwrap();
        let half = IoSpec {
            elem_type: ElemType::F16,
            ..spec("x")
        };
        // Kept as given: each side converts it to the float type its model takes.
        assert_eq!(
            pick_inputs(std::slice::from_ref(&x), &[half], "x.npz").unwrap(),
            [x]
        );
        let ids = HostTensor::new("x", vec![2, 3], TensorData::I32(vec![1; 6])).unwrap();
        let long = IoSpec {
            elem_type: ElemType::I64,
            ..spec("x")
        };
        let err = pick_inputs(&[ids], &[long], "x.npz").unwrap_err();
        assert_eq!(
            err.to_string(),
            "x.npz: input 'x' is int32, the model takes int64"
        );
    }

    #[test]
    fn the_batch_runs_the_samples_unless_a_model_fixes_it() {
        assert_eq!(batch_for_inputs(Some(8), 3, false), 3);
        assert_eq!(batch_for_inputs(Some(8), 3, true), 8);
        assert_eq!(batch_for_inputs(None, 100, false), DEFAULT_BATCH);
    }
}
