//! Seeded random inputs: the same seed gives the same tensors on every machine.

use crate::tensor::{BatchAxes, ElemType, HostTensor, IntInput, IoSpec, TensorData};
use anyhow::{bail, Result};
use half::f16;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal, Uniform};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How random inputs are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum InputDistribution {
    /// Uniform in `[low, high)` (integers: `[low, high]` rounded).
    Uniform {
        /// Lower bound.
        low: f64,
        /// Upper bound.
        high: f64,
    },
    /// Normal with this mean and standard deviation.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
}

/// The seed of the inputs every latency measurement feeds ([`timing_inputs`]).
pub(crate) const TIMING_SEED: u64 = 0;

/// The inputs a latency measurement feeds at batch `batch`, the same on the CPU and on the GPU:
/// every element type drawn uniformly from `[0, 1)` (integers round to 0 or 1) with
/// [`TIMING_SEED`].
pub fn timing_inputs(specs: &[IoSpec], batch: usize) -> Result<Vec<HostTensor>> {
    timing_inputs_on(specs, batch, &BatchAxes::default())
}

/// [`timing_inputs`] for a backend whose inputs are batched on `axes` (an input with no batch
/// axis is drawn at its own dims).
pub(crate) fn timing_inputs_on(
    specs: &[IoSpec],
    batch: usize,
    axes: &BatchAxes,
) -> Result<Vec<HostTensor>> {
    RandomInputs {
        dist: InputDistribution::Uniform {
            low: 0.0,
            high: 1.0,
        },
        seed: TIMING_SEED,
    }
    .generate(specs, batch, axes)
}

/// Random input settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RandomInputs {
    /// The distribution.
    pub dist: InputDistribution,
    /// The seed; input `i` of the model uses `seed + i`.
    pub seed: u64,
}

impl RandomInputs {
    /// Draws `samples` samples for every input in `specs`: each tensor gets the spec's dims with
    /// its batch axis (from `axes`) set to `samples`; an input with no batch axis is drawn once,
    /// at its own dims.
    pub(crate) fn generate(
        &self,
        specs: &[IoSpec],
        samples: usize,
        axes: &BatchAxes,
    ) -> Result<Vec<HostTensor>> {
        specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let axis = axes.axis(&spec.name)?.filter(|_| !spec.dims.is_empty());
                let mut shape = spec.concrete_shape_on(axis, samples)?;
                if let Some(k) = axis {
                    shape[k] = samples;
                }
                let n = shape.iter().product();
                let data = self.draw(spec.elem_type, n, self.seed.wrapping_add(i as u64))?;
                HostTensor::new(spec.name.clone(), shape, data)
            })
            .collect()
    }

    /// `n` values of type `t` from the distribution, drawn from `seed`.
    pub(crate) fn draw(&self, t: ElemType, n: usize, seed: u64) -> Result<TensorData> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let values: Vec<f64> = match self.dist {
            InputDistribution::Uniform { low, high } => {
                if low >= high || !low.is_finite() || !high.is_finite() {
                    bail!("random inputs: the range [{low}, {high}) is empty or not finite");
                }
                let u = Uniform::new(low, high)?;
                (0..n).map(|_| u.sample(&mut rng)).collect()
            }
            InputDistribution::Normal { mean, std } => {
                let d = Normal::new(mean, std)
                    .map_err(|e| anyhow::anyhow!("random inputs: normal({mean}, {std}): {e}"))?;
                (0..n).map(|_| d.sample(&mut rng)).collect()
            }
        };
        Ok(match t {
            ElemType::F32 => TensorData::F32(values.iter().map(|&v| v as f32).collect()),
            ElemType::F16 => TensorData::F16(values.iter().map(|&v| f16::from_f64(v)).collect()),
            ElemType::F64 => TensorData::F64(values),
            ElemType::I64 => TensorData::I64(values.iter().map(|v| v.round() as i64).collect()),
            ElemType::I32 => TensorData::I32(values.iter().map(|v| v.round() as i32).collect()),
            ElemType::I8 => TensorData::I8(values.iter().map(|v| v.round() as i8).collect()),
            ElemType::U8 => TensorData::U8(values.iter().map(|v| v.round() as u8).collect()),
            ElemType::Bool => TensorData::Bool((0..n).map(|_| rng.random_bool(0.5)).collect()),
        })
    }
}

/// Redraws the integer inputs named in `roles` from the values they take (token ids inside the
/// vocabulary, masks of ones then padding zeros, zeros), seeded by `seed`. Other tensors, and
/// named tensors that are not integers, are left as they are.
pub(crate) fn apply_int_inputs(
    tensors: &mut [HostTensor],
    roles: &BTreeMap<String, IntInput>,
    seed: u64,
) -> Result<()> {
    for (i, t) in tensors.iter_mut().enumerate() {
        let Some(role) = roles.get(&t.name) else {
            continue;
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(1000 + i as u64));
        let n: usize = t.shape.iter().product();
        let rows = t.shape.first().copied().unwrap_or(1).max(1);
        let values = role_values(*role, n, rows, &mut rng)
            .map_err(|e| anyhow::anyhow!("{}: {e}", t.name))?;
        if let Some(data) = ints_like(&t.data, &values) {
            t.data = data;
        }
    }
    Ok(())
}

/// `n` values an integer input of role `role` takes, as `rows` rows of equal length (a mask
/// row is ones, then up to half its length of padding zeros).
pub(crate) fn role_values(
    role: IntInput,
    n: usize,
    rows: usize,
    rng: &mut impl Rng,
) -> Result<Vec<i64>> {
    let row_len = n / rows.max(1);
    Ok(match role {
        IntInput::Range { low, high } => {
            if low >= high {
                bail!("the integer range [{low}, {high}) is empty");
            }
            (0..n).map(|_| rng.random_range(low..high)).collect()
        }
        IntInput::Zeros => vec![0; n],
        IntInput::Mask => (0..rows.max(1))
            .flat_map(|_| {
                let pad = rng.random_range(0..=row_len / 2);
                (0..row_len).map(move |k| i64::from(k < row_len - pad))
            })
            .collect(),
    })
}

/// `values` as data of the integer type of `like`; `None` when `like` holds floats.
pub(crate) fn ints_like(like: &TensorData, values: &[i64]) -> Option<TensorData> {
    Some(match like {
        TensorData::I64(_) => TensorData::I64(values.to_vec()),
        TensorData::I32(_) => TensorData::I32(values.iter().map(|&v| v as i32).collect()),
        TensorData::I8(_) => TensorData::I8(values.iter().map(|&v| v as i8).collect()),
        TensorData::U8(_) => TensorData::U8(values.iter().map(|&v| v as u8).collect()),
        TensorData::Bool(_) => TensorData::Bool(values.iter().map(|&v| v != 0).collect()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Dim;

    fn spec(name: &str, t: ElemType) -> IoSpec {
        IoSpec {
            name: name.into(),
            elem_type: t,
            dims: vec![Dim::Symbol("N".into()), Dim::Fixed(3)],
        }
    }

    #[test]
    fn same_seed_same_tensors_within_range() {
        let r = RandomInputs {
            dist: InputDistribution::Uniform {
                low: -1.0,
                high: 2.0,
            },
            seed: 7,
        };
        let specs = [spec("x", ElemType::F32), spec("ids", ElemType::I64)];
        let a = r.generate(&specs, 5, &BatchAxes::default()).unwrap();
        assert_eq!(a, r.generate(&specs, 5, &BatchAxes::default()).unwrap());
        assert_eq!(a[0].shape, vec![5, 3]);
        let TensorData::F32(v) = &a[0].data else {
            panic!("f32 expected")
        };
        assert!(v.iter().all(|&x| (-1.0..2.0).contains(&x)));
        assert!(v.iter().any(|&x| x != v[0]));
        let other = RandomInputs { seed: 8, ..r }
            .generate(&specs, 5, &BatchAxes::default())
            .unwrap();
        assert_ne!(a[0], other[0]);
        let n = RandomInputs {
            dist: InputDistribution::Normal {
                mean: 10.0,
                std: 0.1,
            },
            seed: 1,
        }
        .generate(&specs[..1], 1000, &BatchAxes::default())
        .unwrap();
        let mean = n[0].data.to_f64().iter().sum::<f64>() / 3000.0;
        assert!((mean - 10.0).abs() < 0.02, "{mean}");
        let bad = RandomInputs {
            dist: InputDistribution::Uniform {
                low: 1.0,
                high: 1.0,
            },
            seed: 0,
        };
        assert!(bad.generate(&specs, 1, &BatchAxes::default()).is_err());
    }
}

#[cfg(test)]
mod int_input_tests {
    use super::*;
    use crate::tensor::Dim;

    #[test]
    fn integer_inputs_take_their_values() {
        let spec = |name: &str| IoSpec {
            name: name.into(),
            elem_type: ElemType::I64,
            dims: vec![Dim::Symbol("N".into()), Dim::Fixed(12)],
        };
        let specs = [spec("ids"), spec("mask"), spec("types"), spec("other")];
        let random = RandomInputs {
            dist: InputDistribution::Uniform {
                low: 0.0,
                high: 1.0,
            },
            seed: 3,
        };
        let mut t = random.generate(&specs, 6, &BatchAxes::default()).unwrap();
        let roles = BTreeMap::from([
            ("ids".to_string(), IntInput::Range { low: 0, high: 50 }),
            ("mask".to_string(), IntInput::Mask),
            ("types".to_string(), IntInput::Zeros),
        ]);
        apply_int_inputs(&mut t, &roles, 3).unwrap();
        let ints = |i: usize| match &t[i].data {
            TensorData::I64(v) => v.clone(),
            _ => panic!("int64 expected"),
        };
        let ids = ints(0);
        assert!(ids.iter().all(|v| (0..50).contains(v)));
        let mut distinct = ids.clone();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() > 10, "{distinct:?}");
        for row in ints(1).chunks(12) {
            let ones = row.iter().take_while(|&&v| v == 1).count();
            assert!(ones >= 6, "{row:?}");
            assert!(
                row[ones..].iter().all(|&v| v == 0),
                "ones then zeros: {row:?}"
            );
        }
        assert!(ints(2).iter().all(|&v| v == 0));
        assert!(
            ints(3).iter().all(|&v| v == 0 || v == 1),
            "no role: as drawn"
        );
        let bad = BTreeMap::from([("ids".to_string(), IntInput::Range { low: 5, high: 5 })]);
        assert!(apply_int_inputs(&mut t, &bad, 0).is_err());
    }
}
