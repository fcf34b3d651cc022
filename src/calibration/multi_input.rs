//! Calibration batches for models with several inputs or integer inputs (token models: ids and
//! attention masks): every batch holds one tensor per model input.
//!
//! Two sources: `.npz` files whose arrays are named after the inputs (a folder of them, in name
//! order, or one file), each array one sample or a stack `[n, …]`; or generated data
//! (`synthetic:SEED`), where integer inputs take the values the graph says (token ids inside
//! the embedding table, masks of ones then padding zeros, zeros for segment ids) and float
//! inputs a standard normal. Each input is stacked and cut on its own batch axis; an input with
//! no batch axis is the same in every batch (the first file's array, or drawn once).

use super::sample_source::{
    arrays_summary, fingerprint_file, source_files, usable, CalibrationBatches, SourceSummary,
};
use crate::data::batch_axis::{concat_on, slice_padded_on};
use crate::data::npz;
use crate::data::synthetic::{apply_int_inputs, InputDistribution, RandomInputs};
use crate::digest::Sha256Stream;
use crate::tensor::{BatchAxes, HostTensor, IntInput, IoSpec};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// Where the batches come from.
enum Source {
    /// Every input's samples, joined along its batch axis, cut into batches as they are asked
    /// for.
    Arrays(Vec<HostTensor>),
    /// Drawn per batch from `seed`.
    Generated {
        seed: u64,
        roles: BTreeMap<String, IntInput>,
    },
}

/// Batches holding every input of a model.
pub(crate) struct MultiInputBatches {
    specs: Vec<IoSpec>,
    axes: BatchAxes,
    source: Source,
    done: usize,
    facts: SourceSummary,
}

/// How the values of each input are made, as people read it.
fn describe_roles(specs: &[IoSpec], roles: &BTreeMap<String, IntInput>) -> String {
    let parts: Vec<String> = specs
        .iter()
        .map(|s| match roles.get(&s.name) {
            Some(role) => format!("{}: {role}", s.name),
            None if s.elem_type.is_float() => format!("{}: standard normal", s.name),
            None => format!("{}: uniform 0 or 1", s.name),
        })
        .collect();
    parts.join("; ")
}

impl MultiInputBatches {
    /// Generated batches for `specs` (sample dims fixed, axis 0 the batch): `samples` samples (the
    /// last batch short when `batch` does not divide them), integer inputs following `roles`.
    pub fn generated(
        specs: &[IoSpec],
        roles: BTreeMap<String, IntInput>,
        batch: usize,
        samples: usize,
        seed: u64,
    ) -> Result<Self> {
        let used = usable(
            &format!("synthetic data (seed {seed})"),
            samples,
            None,
            batch,
        )?;
        let shapes: Vec<String> = specs
            .iter()
            .map(|s| format!("{}{:?}", s.name, s.concrete_shape(1).unwrap_or_default()))
            .collect();
        let preprocessing = format!("generated: {}", describe_roles(specs, &roles));
        Ok(MultiInputBatches {
            specs: specs.to_vec(),
            axes: BatchAxes::default(),
            source: Source::Generated { seed, roles },
            done: 0,
            facts: SourceSummary::new(
                batch,
                used,
                samples,
                format!(
                    "synthetic seed={seed} samples={used} inputs={}",
                    shapes.join(",")
                ),
                preprocessing,
            ),
        })
    }

    /// Batches from `.npz` files at `path` (a folder of them or one file): each file holds an
    /// array per input, named after it, of that input's type and sample dims.
    /// Each input is stacked on its batch axis in `axes`; an input with no batch axis takes the
    /// first file's array, whole.
    pub fn arrays(
        path: &Path,
        specs: &[IoSpec],
        axes: &BatchAxes,
        batch: usize,
        limit: Option<usize>,
    ) -> Result<Self> {
        let shown = path.display().to_string();
        let files = source_files(
            path,
            |p| p.extension().is_some_and(|e| e == "npz"),
            "no .npz files in the folder (a model with several or integer inputs calibrates from .npz files holding an array per input)",
        )?;
        let mut hasher = Sha256Stream::new();
        let mut parts: Vec<Vec<HostTensor>> = vec![vec![]; specs.len()];
        for f in &files {
            let bytes =
                std::fs::read(f).with_context(|| format!("{}: cannot read", f.display()))?;
            fingerprint_file(&mut hasher, f, &bytes);
            let mut arrays = npz::load_bytes(f, &bytes)?;
            let mut samples = None;
            for (spec, part) in specs.iter().zip(parts.iter_mut()) {
                let axis = axis_of(axes, spec)?;
                let array = take_array(f, &mut arrays, spec, axis)?;
                let Some(k) = axis else {
                    if part.is_empty() {
                        part.push(array);
                    }
                    continue;
                };
                let n = array.shape[k];
                if samples.is_some_and(|m| m != n) {
                    bail!(
                        "{}: array '{}' holds {n} samples, the arrays before it {}",
                        f.display(),
                        spec.name,
                        samples.unwrap_or_default()
                    );
                }
                samples = Some(n);
                part.push(array);
            }
        }
        let joined: Vec<HostTensor> = parts
            .into_iter()
            .zip(specs)
            .map(|(part, spec)| concat_on(part, axis_of(axes, spec)?))
            .collect::<Result<_>>()?;
        let available = joined
            .iter()
            .zip(specs)
            .find_map(|(t, spec)| Some(t.shape[axis_of(axes, spec).ok()??]))
            .unwrap_or(0);
        Ok(MultiInputBatches {
            specs: specs.to_vec(),
            axes: axes.clone(),
            source: Source::Arrays(joined),
            done: 0,
            facts: arrays_summary(
                &shown,
                hasher,
                available,
                limit,
                batch,
                "none (numpy arrays fed as stored, one per input)",
            )?,
        })
    }
}

/// The batch axis of `spec` (a scalar has none).
fn axis_of(axes: &BatchAxes, spec: &IoSpec) -> Result<Option<usize>> {
    Ok(axes.axis(&spec.name)?.filter(|_| !spec.dims.is_empty()))
}

/// The array of `arrays` named after `spec`, checked against its type and sample dims, as a
/// stack on its batch axis `axis` (`[n, …]` on axis 0); with no batch axis, as declared.
fn take_array(
    file: &Path,
    arrays: &mut Vec<HostTensor>,
    spec: &IoSpec,
    axis: Option<usize>,
) -> Result<HostTensor> {
    let shown = file.display();
    let Some(at) = arrays.iter().position(|a| a.name == spec.name) else {
        let names: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
        bail!(
            "{shown}: no array named '{}' (the file holds {}; the model's inputs each need one)",
            spec.name,
            names.join(", ")
        );
    };
    let mut a = arrays.swap_remove(at);
    if a.elem_type() != spec.elem_type {
        bail!(
            "{shown}: array '{}' is {}, the model input is {}",
            spec.name,
            a.elem_type(),
            spec.elem_type
        );
    }
    let Some(k) = axis else {
        let whole = spec.concrete_shape_on(None, 1)?;
        if a.shape != whole {
            bail!(
                "{shown}: array '{}' has shape {:?}; the model input has no batch axis and takes {:?}",
                spec.name,
                a.shape,
                whole
            );
        }
        return Ok(a);
    };
    let mut sample = spec.concrete_shape_on(Some(k), 1)?;
    sample.remove(k);
    let mut rest = a.shape.clone();
    if a.shape == sample {
        a.shape.insert(k, 1);
    } else if a.shape.len() != sample.len() + 1 || {
        rest.remove(k);
        rest != sample
    } {
        bail!(
            "{shown}: array '{}' has shape {:?}; the model input takes samples {:?} (one, or a stack of n on axis {k})",
            spec.name,
            a.shape,
            sample
        );
    }
    Ok(a)
}

impl Iterator for MultiInputBatches {
    type Item = Result<Vec<HostTensor>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done == self.facts.batches {
            return None;
        }
        let i = self.done;
        self.done += 1;
        Some(match &self.source {
            Source::Arrays(all) => all
                .iter()
                .zip(&self.specs)
                .map(|(t, spec)| {
                    let axis = axis_of(&self.axes, spec)?;
                    slice_padded_on(t, axis, i * self.facts.batch, self.facts.rows(i))
                })
                .collect(),
            Source::Generated { seed, roles } => {
                let seed = seed.wrapping_add(i as u64 * 7919);
                RandomInputs {
                    dist: InputDistribution::Normal {
                        mean: 0.0,
                        std: 1.0,
                    },
                    seed,
                }
                .generate(&self.specs, self.facts.rows(i), &self.axes)
                .and_then(|mut tensors| {
                    apply_int_inputs(&mut tensors, roles, seed)?;
                    Ok(tensors)
                })
                .and_then(|tensors| self.same_unbatched(tensors))
            }
        })
    }
}

impl MultiInputBatches {
    /// Generated batches with the inputs batched on `axes` (an input with no batch axis is
    /// drawn once, the same in every batch).
    pub(crate) fn with_axes(mut self, axes: BatchAxes) -> Self {
        self.axes = axes;
        self
    }

    /// `tensors` of a generated batch with the inputs that have no batch axis as the first
    /// batch drew them.
    fn same_unbatched(&self, mut tensors: Vec<HostTensor>) -> Result<Vec<HostTensor>> {
        let Source::Generated { seed, roles } = &self.source else {
            return Ok(tensors);
        };
        if self.axes.unbatched_inputs().is_empty() {
            return Ok(tensors);
        }
        let mut first = RandomInputs {
            dist: InputDistribution::Normal {
                mean: 0.0,
                std: 1.0,
            },
            seed: *seed,
        }
        .generate(&self.specs, 1, &self.axes)?;
        apply_int_inputs(&mut first, roles, *seed)?;
        for (t, once) in
            tensors
                .iter_mut()
                .zip(first)
                .zip(&self.specs)
                .filter_map(|((t, once), spec)| match axis_of(&self.axes, spec) {
                    Ok(None) => Some((t, once)),
                    _ => None,
                })
        {
            *t = once;
        }
        Ok(tensors)
    }
}

impl CalibrationBatches for MultiInputBatches {
    fn summary(&self) -> &SourceSummary {
        &self.facts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{Dim, ElemType, TensorData};

    fn specs() -> Vec<IoSpec> {
        ["input_ids", "attention_mask"]
            .iter()
            .map(|n| IoSpec {
                name: n.to_string(),
                elem_type: ElemType::I64,
                dims: vec![Dim::Symbol("batch".into()), Dim::Fixed(6)],
            })
            .collect()
    }

    #[test]
    fn generated_batches_follow_the_roles_and_the_seed() {
        let roles = BTreeMap::from([
            (
                "input_ids".to_string(),
                IntInput::Range { low: 0, high: 30 },
            ),
            ("attention_mask".to_string(), IntInput::Mask),
        ]);
        let all = |seed| -> Vec<Vec<HostTensor>> {
            MultiInputBatches::generated(&specs(), roles.clone(), 4, 10, seed)
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let a = all(3);
        assert_eq!(a.len(), 3, "10 samples: two batches of 4 and one of 2");
        assert_eq!(a[2][0].shape[0], 2);
        assert_eq!(a, all(3));
        assert_ne!(a, all(4));
        let TensorData::I64(ids) = &a[0][0].data else {
            panic!("int64 expected")
        };
        assert!(ids.iter().all(|v| (0..30).contains(v)));
        assert!(ids.iter().collect::<std::collections::HashSet<_>>().len() > 2);
        let TensorData::I64(mask) = &a[1][1].data else {
            panic!("int64 expected")
        };
        for row in mask.chunks(6) {
            let ones = row.iter().take_while(|&&v| v == 1).count();
            assert!(ones >= 3 && row[ones..].iter().all(|&v| v == 0), "{row:?}");
        }
        let b = MultiInputBatches::generated(&specs(), roles, 4, 10, 3).unwrap();
        assert!(b.preprocessing().contains("input_ids: integers in [0, 30)"));
    }

    #[test]
    fn npz_arrays_are_joined_across_files_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let tensor = |name: &str, n: usize, v: i64| {
            HostTensor::new(name, vec![n, 6], TensorData::I64(vec![v; n * 6])).unwrap()
        };
        for (file, n, v) in [("a.npz", 3, 1), ("b.npz", 5, 2)] {
            npz::save(
                &dir.path().join(file),
                &[tensor("attention_mask", n, 1), tensor("input_ids", n, v)],
            )
            .unwrap();
        }
        let b = MultiInputBatches::arrays(dir.path(), &specs(), &BatchAxes::default(), 4, None)
            .unwrap();
        assert_eq!(b.batch_count(), 2);
        let batches: Vec<Vec<HostTensor>> = b.map(Result::unwrap).collect();
        assert_eq!(batches[0][0].name, "input_ids");
        assert_eq!(batches[0][0].shape, vec![4, 6]);
        let TensorData::I64(ids) = &batches[0][0].data else {
            panic!("int64 expected")
        };
        assert_eq!(ids[..18], [1; 18]);
        assert_eq!(ids[18..], [2; 6]);
        // An input without its array, or an array of another type, names the file.
        npz::save(&dir.path().join("c.npz"), &[tensor("input_ids", 2, 0)]).unwrap();
        let err = format!(
            "{:#}",
            MultiInputBatches::arrays(dir.path(), &specs(), &BatchAxes::default(), 4, None)
                .err()
                .unwrap()
        );
        assert!(
            err.contains("c.npz: no array named 'attention_mask'"),
            "{err}"
        );
        let f32_ids = HostTensor::new("input_ids", vec![2, 6], TensorData::F32(vec![0.0; 12]));
        npz::save(
            &dir.path().join("c.npz"),
            &[tensor("attention_mask", 2, 1), f32_ids.unwrap()],
        )
        .unwrap();
        let err = format!(
            "{:#}",
            MultiInputBatches::arrays(dir.path(), &specs(), &BatchAxes::default(), 4, None)
                .err()
                .unwrap()
        );
        assert!(err.contains("c.npz: array 'input_ids' is float32"), "{err}");
    }
}
