//! Random inputs drawn sample by sample: sample `s` of input `i` comes from a seed of its own,
//! so any window of samples is drawn alone, the same whatever batch it falls in and however many
//! samples the run has, and a run of thousands of samples holds one batch of inputs at a time.

use super::batch_axis::concat_on;
use super::synthetic::{ints_like, role_values, RandomInputs};
use crate::tensor::{BatchAxes, HostTensor, IntInput, IoSpec};
use anyhow::{Context, Result};
use rand::SeedableRng;
use std::collections::BTreeMap;

/// The sample index an input with no batch axis is drawn as (once, for every window).
const UNBATCHED: u64 = u64::MAX;

/// The seed of sample `sample` of input `input` (SplitMix64's finalizer over the three).
fn sample_seed(seed: u64, input: usize, sample: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((input as u64).rotate_left(40))
        ^ sample.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Random samples of a model's inputs, any window of which can be drawn on its own.
#[derive(Clone, Debug)]
pub(crate) struct RandomWindows {
    random: RandomInputs,
    specs: Vec<IoSpec>,
    /// Values integer inputs take (token ids, masks, zeros), by input name.
    roles: BTreeMap<String, IntInput>,
    axes: BatchAxes,
}

impl RandomWindows {
    /// Samples of the inputs `specs`, batched on `axes`, drawn from `random`; the integer inputs
    /// named in `roles` take the values their role says.
    pub fn new(
        random: RandomInputs,
        specs: &[IoSpec],
        roles: BTreeMap<String, IntInput>,
        axes: &BatchAxes,
    ) -> RandomWindows {
        RandomWindows {
            random,
            specs: specs.to_vec(),
            roles,
            axes: axes.clone(),
        }
    }

    /// Samples `start..start + len` of every input, joined on its batch axis; an input with no
    /// batch axis is the same tensor in every window.
    pub fn window(&self, start: usize, len: usize) -> Result<Vec<HostTensor>> {
        self.specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let axis = self
                    .axes
                    .axis(&spec.name)?
                    .filter(|_| !spec.dims.is_empty());
                let Some(axis) = axis else {
                    let shape = spec.concrete_shape_on(None, 0)?;
                    return self.draw(i, spec, shape, UNBATCHED);
                };
                let mut shape = spec.concrete_shape_on(Some(axis), 1)?;
                shape[axis] = 1;
                let samples = (start..start + len)
                    .map(|s| self.draw(i, spec, shape.clone(), s as u64))
                    .collect::<Result<Vec<_>>>()?;
                concat_on(samples, Some(axis))
            })
            .collect()
    }

    /// One sample (or the whole of an input with no batch axis) of input `i`, shaped `shape`.
    fn draw(&self, i: usize, spec: &IoSpec, shape: Vec<usize>, sample: u64) -> Result<HostTensor> {
        let n = shape.iter().product();
        let seed = sample_seed(self.random.seed, i, sample);
        let mut data = self.random.draw(spec.elem_type, n, seed)?;
        if let Some(role) = self.roles.get(&spec.name) {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x05EE_D1D5);
            let rows = if sample == UNBATCHED {
                shape.first().copied().unwrap_or(1)
            } else {
                1
            };
            let values = role_values(*role, n, rows, &mut rng)
                .with_context(|| format!("input '{}'", spec.name))?;
            if let Some(ints) = ints_like(&data, &values) {
                data = ints;
            }
        }
        HostTensor::new(spec.name.clone(), shape, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic::InputDistribution;
    use crate::tensor::{BatchAxisRequest, Declared, Dim, ElemType, TensorData};

    fn spec(name: &str, elem_type: ElemType, dims: Vec<Dim>) -> IoSpec {
        IoSpec {
            name: name.into(),
            elem_type,
            dims,
        }
    }

    fn windows(specs: &[IoSpec], axes: BatchAxes) -> RandomWindows {
        let random = RandomInputs {
            dist: InputDistribution::Uniform {
                low: -1.0,
                high: 1.0,
            },
            seed: 11,
        };
        let roles = BTreeMap::from([("mask".to_string(), IntInput::Mask)]);
        RandomWindows::new(random, specs, roles, &axes)
    }

    #[test]
    fn a_window_is_the_same_samples_whatever_the_batch() {
        let n = || Dim::Symbol("N".into());
        let specs = [
            spec("x", ElemType::F32, vec![n(), Dim::Fixed(3)]),
            spec("mask", ElemType::I64, vec![n(), Dim::Fixed(8)]),
            spec(
                "state",
                ElemType::F32,
                vec![Dim::Fixed(2), n(), Dim::Fixed(4)],
            ),
            spec("rate", ElemType::I64, vec![]),
        ];
        let declared: Vec<Declared> = specs
            .iter()
            .map(|s| Declared {
                name: &s.name,
                dims: Some(&s.dims),
            })
            .collect();
        let axes = BatchAxes::infer(&declared, &[], &BatchAxisRequest::default()).unwrap();
        let w = windows(&specs, axes);
        let whole = w.window(0, 5).unwrap();
        assert_eq!(whole[2].shape, [2, 5, 4]);
        assert_eq!(whole[3].shape, Vec::<usize>::new());
        let parts: Vec<Vec<HostTensor>> = [(0, 2), (2, 2), (4, 1)]
            .iter()
            .map(|&(s, l)| w.window(s, l).unwrap())
            .collect();
        for (i, axis) in [(0, Some(0)), (1, Some(0)), (2, Some(1)), (3, None)] {
            let column = parts.iter().map(|p| p[i].clone()).collect();
            assert_eq!(concat_on(column, axis).unwrap(), whole[i], "input {i}");
        }
        // Samples differ from one another, and a mask row is ones then zeros.
        let x = whole[0].data.to_f64();
        assert_ne!(x[..3], x[3..6]);
        let TensorData::I64(mask) = &whole[1].data else {
            panic!("int64 expected")
        };
        for row in mask.chunks(8) {
            let ones = row.iter().take_while(|&&v| v == 1).count();
            assert!(ones >= 4 && row[ones..].iter().all(|&v| v == 0), "{row:?}");
        }
    }
}
