//! An engine's inputs and outputs in trtkit's terms, with no TensorRT call in it: TensorRT data
//! types as element types, engine dims as I/O specs (`-1` becomes a symbolic axis), the shapes
//! an input takes at a batch size and whether the engine's optimization profile allows them,
//! and the bytes each tensor needs.

use super::profile::{format_shape, InputProfile};
use crate::tensor::{Dim, ElemType, IoSpec};
use anyhow::{bail, Result};
use trtx::DataType;

/// The host element type of a TensorRT data type; `None` for types trtkit cannot move to the
/// host (bfloat16, FP8, INT4, FP4).
pub fn elem_type(t: DataType) -> Option<ElemType> {
    Some(match t {
        DataType::kFLOAT => ElemType::F32,
        DataType::kHALF => ElemType::F16,
        DataType::kINT8 => ElemType::I8,
        DataType::kINT32 => ElemType::I32,
        DataType::kINT64 => ElemType::I64,
        DataType::kBOOL => ElemType::Bool,
        DataType::kUINT8 => ElemType::U8,
        _ => return None,
    })
}

/// A TensorRT data type's name as trtkit prints element types (`float32`, `float16`, …).
pub(crate) fn dtype_name(t: DataType) -> String {
    match (elem_type(t), t) {
        (Some(e), _) => e.to_string(),
        (None, DataType::kBF16) => "bfloat16".into(),
        (None, DataType::kFP8) => "fp8".into(),
        (None, other) => format!("{other:?}"),
    }
}

/// The I/O spec of an engine tensor: `-1` on axis 0 is the batch, elsewhere a named dynamic
/// axis (`<tensor>_<axis>`).
pub(crate) fn io_spec(name: &str, elem_type: ElemType, dims: &[i64]) -> IoSpec {
    let dims = dims
        .iter()
        .enumerate()
        .map(|(axis, &d)| match (d, axis) {
            (d, _) if d >= 0 => Dim::Fixed(d),
            (_, 0) => Dim::Symbol("batch".into()),
            (_, axis) => Dim::Symbol(format!("{name}_{axis}")),
        })
        .collect();
    IoSpec {
        name: name.into(),
        elem_type,
        dims,
    }
}

/// The shape an engine input takes at `batch`: its dims with `-1` on axis 0 replaced; any
/// other dynamic axis is an error naming it (such engines need explicit shapes).
pub(crate) fn input_shape_at(name: &str, dims: &[i64], batch: usize) -> Result<Vec<i64>> {
    dims.iter()
        .enumerate()
        .map(|(axis, &d)| match (d, axis) {
            (d, _) if d >= 0 => Ok(d),
            (_, 0) => Ok(batch as i64),
            (_, axis) => bail!(
                "input '{name}' ({}) has a dynamic axis {axis} besides the batch; trtkit sets only the batch of an engine's inputs",
                format_shape(dims)
            ),
        })
        .collect()
}

/// Bytes of a tensor of `shape` and element size `elem_size`; a negative dim (an output whose
/// shape depends on the data) is an error naming the tensor.
pub(crate) fn tensor_bytes(name: &str, shape: &[i64], elem_size: usize) -> Result<usize> {
    let mut n = elem_size;
    for &d in shape {
        if d < 0 {
            bail!(
                "tensor '{name}' has shape {} once the inputs are set: its size depends on the data, which trtkit does not run",
                format_shape(shape)
            );
        }
        n *= d as usize;
    }
    Ok(n)
}

/// The bytes of every tensor of `specs` at the matching `shapes` ([`tensor_bytes`] each).
pub(crate) fn buffer_sizes(specs: &[IoSpec], shapes: &[Vec<i64>]) -> Result<Vec<usize>> {
    specs
        .iter()
        .zip(shapes)
        .map(|(s, shape)| tensor_bytes(&s.name, shape, s.elem_type.size()))
        .collect()
}

/// Whether `shape` lies between a profile's `min` and `max`, axis by axis.
pub(crate) fn in_profile(shape: &[i64], profile: &InputProfile) -> bool {
    shape.len() == profile.min.len()
        && shape.len() == profile.max.len()
        && shape
            .iter()
            .zip(profile.min.iter().zip(&profile.max))
            .all(|(s, (lo, hi))| lo <= s && s <= hi)
}

/// The message for a batch an engine's optimization profile does not take, naming the profile's
/// min and max shapes for the input (`range`: known from the sidecar, or found by probing) and
/// what to do.
pub(crate) fn batch_outside_profile(
    engine: &str,
    input: &str,
    batch: usize,
    range: Option<&InputProfile>,
) -> String {
    let bounds = match range {
        Some(p) => format!(
            "input '{input}' takes min {} to max {}",
            format_shape(&p.min),
            format_shape(&p.max)
        ),
        None => format!("input '{input}' refused it, and its bounds could not be found"),
    };
    format!(
        "{engine}: batch {batch} is outside the engine's optimization profile 0: {bounds}; run a batch inside it, or rebuild the engine with `trtkit build --max-batch {batch}`"
    )
}

/// The batch range an input accepts, found by asking `accepts` (TensorRT's `setInputShape`,
/// which refuses shapes outside the profile): the smallest accepted batch by doubling from 1,
/// then the largest by bisection, up to `limit`. `None` when no batch up to `limit` is taken.
pub(crate) fn probe_batch_range(
    mut accepts: impl FnMut(usize) -> bool,
    limit: usize,
) -> Option<(usize, usize)> {
    let mut lo = 1;
    while !accepts(lo) {
        if lo >= limit {
            return None;
        }
        lo = (lo * 2).min(limit);
    }
    // `lo` is accepted; a smaller accepted batch lies after the last refused doubling.
    let mut refused_below = lo / 2;
    let mut min = lo;
    while refused_below + 1 < min {
        let mid = (refused_below + min) / 2;
        if accepts(mid) {
            min = mid;
        } else {
            refused_below = mid;
        }
    }
    let (mut good, mut bad) = (lo, limit + 1);
    let mut step = lo.max(1);
    while good + step < bad && accepts(good + step) {
        good += step;
        step *= 2;
    }
    bad = bad.min(good + step);
    while good + 1 < bad {
        let mid = good + (bad - good) / 2;
        if accepts(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some((min, good))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_type_maps_and_the_rest_is_named() {
        let pairs = [
            (DataType::kFLOAT, ElemType::F32),
            (DataType::kHALF, ElemType::F16),
            (DataType::kINT8, ElemType::I8),
            (DataType::kINT32, ElemType::I32),
            (DataType::kINT64, ElemType::I64),
            (DataType::kBOOL, ElemType::Bool),
            (DataType::kUINT8, ElemType::U8),
        ];
        for (t, e) in pairs {
            assert_eq!(elem_type(t), Some(e));
            assert_eq!(dtype_name(t), e.to_string());
        }
        assert_eq!(elem_type(DataType::kBF16), None);
        assert_eq!(dtype_name(DataType::kBF16), "bfloat16");
        assert_eq!(dtype_name(DataType::kFP8), "fp8");
    }

    #[test]
    fn dynamic_axes_become_symbols() {
        let s = io_spec("x", ElemType::F32, &[-1, 3, 224, -1]);
        assert_eq!(
            s.dims,
            vec![
                Dim::Symbol("batch".into()),
                Dim::Fixed(3),
                Dim::Fixed(224),
                Dim::Symbol("x_3".into())
            ]
        );
        assert_eq!(
            input_shape_at("x", &[-1, 3, 8, 8], 16).unwrap(),
            vec![16, 3, 8, 8]
        );
        assert_eq!(input_shape_at("x", &[4, 3], 16).unwrap(), vec![4, 3]);
        let err = input_shape_at("ids", &[-1, -1], 2).unwrap_err().to_string();
        assert!(err.contains("'ids'") && err.contains("axis 1"), "{err}");
    }

    #[test]
    fn buffer_sizes_follow_shapes_and_refuse_data_dependent_ones() {
        assert_eq!(tensor_bytes("y", &[32, 1000], 4).unwrap(), 128_000);
        assert_eq!(tensor_bytes("h", &[8, 3, 224, 224], 2).unwrap(), 2_408_448);
        assert_eq!(tensor_bytes("s", &[], 4).unwrap(), 4);
        let err = tensor_bytes("boxes", &[-1, 4], 4).unwrap_err().to_string();
        assert!(err.contains("'boxes'") && err.contains("?×4"), "{err}");
    }

    #[test]
    fn profile_bounds_are_checked_per_axis() {
        let p = InputProfile {
            name: "x".into(),
            min: vec![1, 3, 16, 16],
            opt: vec![8, 3, 16, 16],
            max: vec![64, 3, 16, 16],
        };
        assert!(in_profile(&[1, 3, 16, 16], &p));
        assert!(in_profile(&[64, 3, 16, 16], &p));
        assert!(!in_profile(&[65, 3, 16, 16], &p));
        assert!(!in_profile(&[8, 3, 16, 17], &p));
        assert!(!in_profile(&[8, 3, 16], &p));
        let m = batch_outside_profile("m.engine", "x", 65, Some(&p));
        assert!(
            m.contains("batch 65")
                && m.contains("profile 0")
                && m.contains("min 1×3×16×16")
                && m.contains("max 64×3×16×16")
                && m.contains("--max-batch 65"),
            "{m}"
        );
    }

    #[test]
    fn probing_finds_the_accepted_range() {
        for (lo, hi) in [(1, 1), (1, 64), (4, 4), (3, 100), (17, 33), (1, 4096)] {
            let mut calls = 0;
            let found = probe_batch_range(
                |b| {
                    calls += 1;
                    (lo..=hi).contains(&b)
                },
                4096,
            );
            assert_eq!(found, Some((lo, hi)), "range {lo}..={hi}");
            assert!(calls < 64, "{calls} calls for {lo}..={hi}");
        }
        assert_eq!(probe_batch_range(|_| false, 64), None);
    }
}
