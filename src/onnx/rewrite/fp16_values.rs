//! Float32 values into float16 for the FP16 rewrite, on every core.
//!
//! A ResNet-50 holds 25 M weights: converted one at a time they took a fifth of a second, most
//! of what `build --fp16` adds to TensorRT's own build. Here the initializers are converted in
//! parallel and each one in chunks, with the CPU's float16 instructions (F16C) where it has
//! them (through `half`'s slice conversion); the result is the same as converting each value
//! with `f16::from_f32` (round to nearest even), which the tests check.

use super::initializer::{read_f32, set_f16};
use crate::onnx::dtype::data_type;
use crate::onnx::pb::tensor_proto::{DataLocation, DataType};
use crate::onnx::pb::TensorProto;
use anyhow::{bail, Result};
use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;
use std::collections::HashMap;
use std::ops::Range;

/// Values per task: large enough that the split costs nothing, small enough to spread one big
/// initializer over 16 cores.
const CHUNK: usize = 1 << 15;

/// Converts `values` to float16, clamping finite values beyond ±65504 to it (infinities and
/// NaN stay what they are); true if anything was clamped.
pub(crate) fn to_f16_clamped(values: &[f32]) -> (Vec<f16>, bool) {
    let mut out = vec![f16::ZERO; values.len()];
    let clamped = out
        .par_chunks_mut(CHUNK)
        .zip(values.par_chunks(CHUNK))
        .map(|(dst, src)| convert_chunk(src, dst))
        .reduce(|| false, |a, b| a || b);
    (out, clamped)
}

/// One chunk of [`to_f16_clamped`]: the fast slice conversion unless a value needs clamping.
fn convert_chunk(src: &[f32], dst: &mut [f16]) -> bool {
    let max = f16::MAX.to_f32();
    if !src.iter().any(|x| x.is_finite() && x.abs() > max) {
        dst.convert_from_f32_slice(src);
        return false;
    }
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = f16::from_f32(if x.is_finite() { x.clamp(-max, max) } else { x });
    }
    true
}

/// Float32 little-endian bytes to float16 little-endian bytes (clamped as
/// [`to_f16_clamped`]), chunk by chunk on every core; true if anything was clamped.
fn f16_bytes_from_f32_bytes(raw: &[u8]) -> (Vec<u8>, bool) {
    let mut out = vec![0u8; raw.len() / 2];
    let clamped = out
        .par_chunks_mut(CHUNK * 2)
        .zip(raw.par_chunks(CHUNK * 4))
        .map(|(dst, src)| convert_bytes(src, dst))
        .reduce(|| false, |a, b| a || b);
    (out, clamped)
}

/// One chunk of [`f16_bytes_from_f32_bytes`], through buffers on the stack (a heap buffer per
/// chunk cost a map and unmap of fresh pages each time).
fn convert_bytes(src: &[u8], dst: &mut [u8]) -> bool {
    const BLOCK: usize = 512;
    let mut values = [0f32; BLOCK];
    let mut halves = [f16::ZERO; BLOCK];
    let mut clamped = false;
    for (s, d) in src.chunks(BLOCK * 4).zip(dst.chunks_mut(BLOCK * 2)) {
        let n = s.len() / 4;
        for (v, b) in values.iter_mut().zip(s.chunks_exact(4)) {
            *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        clamped |= convert_chunk(&values[..n], &mut halves[..n]);
        for (o, h) in d.chunks_exact_mut(2).zip(&halves[..n]) {
            o.copy_from_slice(&h.to_le_bytes());
        }
    }
    clamped
}

/// Makes a float32 initializer float16 in place; true if a value was clamped.
pub(crate) fn convert_tensor(t: &mut TensorProto) -> Result<bool> {
    let raw_f32 = data_type(t.data_type) == Some(DataType::Float)
        && t.data_location != Some(DataLocation::External as i32)
        && !t.raw_data.is_empty();
    if !raw_f32 {
        let (h, clamped) = to_f16_clamped(&read_f32(t)?);
        set_f16(t, &h);
        return Ok(clamped);
    }
    let raw = std::mem::take(&mut t.raw_data);
    set_f16_from_f32_bytes(t, &raw)
}

/// Weights still in the model file's bytes (see [`crate::onnx::deferred_weights`]): the byte
/// range of each one's float32 data by initializer name, and the file's bytes.
pub(crate) type FileWeights<'a> = (&'a HashMap<String, Range<usize>>, &'a [u8]);

/// Converts the initializers whose flag in `convert` is set (one flag per initializer, in
/// order), all in parallel; returns the names of those that had values clamped, in order. An
/// initializer whose data is still in the file (`file`) is converted straight from the file's
/// bytes, or, when not converted, given its bytes back.
pub(crate) fn convert_tensors(
    tensors: &mut [TensorProto],
    convert: &[bool],
    file: Option<FileWeights>,
) -> Result<Vec<String>> {
    let clamped: Vec<Option<String>> = tensors
        .par_iter_mut()
        .zip(convert.par_iter())
        .map(|(t, &c)| -> Result<Option<String>> {
            let clamped =
                match file.and_then(|(ranges, bytes)| Some(&bytes[ranges.get(&t.name)?.clone()])) {
                    Some(bytes) if c => set_f16_from_f32_bytes(t, bytes)?,
                    Some(bytes) => {
                        t.raw_data = bytes.to_vec();
                        false
                    }
                    None => c && convert_tensor(t)?,
                };
            Ok(clamped.then(|| t.name.clone()))
        })
        .collect::<Result<_>>()?;
    Ok(clamped.into_iter().flatten().collect())
}

/// Makes `t` float16 from float32 little-endian `raw` bytes (its own, or the model file's); true if a value
/// was clamped.
fn set_f16_from_f32_bytes(t: &mut TensorProto, raw: &[u8]) -> Result<bool> {
    if !raw.len().is_multiple_of(4) {
        bail!(
            "initializer '{}': raw data is not a whole number of float32",
            t.name
        );
    }
    let (halves, clamped) = f16_bytes_from_f32_bytes(raw);
    t.data_type = DataType::Float16 as i32;
    t.float_data.clear();
    t.int32_data.clear();
    t.raw_data = halves;
    Ok(clamped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::graph_builder::tensor_f32;
    use proptest::prelude::*;

    fn one_by_one(values: &[f32]) -> Vec<f16> {
        let max = f16::MAX.to_f32();
        values
            .iter()
            .map(|&x| f16::from_f32(if x.is_finite() { x.clamp(-max, max) } else { x }))
            .collect()
    }

    fn bits(v: &[f16]) -> Vec<u16> {
        v.iter().map(|h| h.to_bits()).collect()
    }

    /// Values over and beyond the float16 range, with NaN, infinities, the clamping edges,
    /// float16 subnormals and float32 extremes mixed in.
    fn values(len: usize, seed: u64) -> Vec<f32> {
        use rand::{Rng, SeedableRng};
        const SPECIAL: [f32; 8] = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            65520.0,
            -65519.0,
            5.96e-8,
            f32::MIN_POSITIVE,
            f32::MAX,
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        (0..len)
            .map(|_| match rng.random_range(0..16) {
                0 => SPECIAL[rng.random_range(0..SPECIAL.len())],
                1..=4 => rng.random_range(-1.0f32..1.0),
                _ => rng.random_range(-70000.0f32..70000.0),
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn chunked_conversion_equals_value_by_value(
            len in prop_oneof![0usize..70, 0..3 * CHUNK + 7],
            seed in any::<u64>(),
        ) {
            let values = values(len, seed);
            let (h, clamped) = to_f16_clamped(&values);
            prop_assert_eq!(bits(&h), bits(&one_by_one(&values)));
            let beyond = values.iter().any(|x| x.is_finite() && x.abs() > 65504.0);
            prop_assert_eq!(clamped, beyond);

            let mut t = tensor_f32("w", &[values.len() as i64], &values);
            let from_tensor = convert_tensor(&mut t).unwrap();
            prop_assert_eq!(from_tensor, beyond);
            prop_assert_eq!(t.data_type, DataType::Float16 as i32);
            let want: Vec<u8> = one_by_one(&values).iter().flat_map(|h| h.to_le_bytes()).collect();
            prop_assert_eq!(&t.raw_data, &want);
        }
    }

    #[test]
    fn only_flagged_tensors_change_and_clamped_names_come_in_order() {
        let mut tensors = vec![
            tensor_f32("a", &[2], &[1e6, 0.5]),
            tensor_f32("b", &[1], &[2.0]),
            tensor_f32("c", &[2], &[-1e6, 1.0]),
            tensor_f32("d", &[1], &[1e6]),
        ];
        let before_b = tensors[1].clone();
        let clamped = convert_tensors(&mut tensors, &[true, false, true, true], None).unwrap();
        assert_eq!(clamped, ["a", "c", "d"]);
        assert_eq!(tensors[1], before_b);
        assert_eq!(tensors[0].data_type, DataType::Float16 as i32);
        assert_eq!(
            tensors[2].raw_data,
            [f16::MIN.to_le_bytes(), f16::ONE.to_le_bytes()].concat()
        );
    }

    #[test]
    fn ragged_raw_data_is_an_error_naming_the_tensor() {
        let mut t = tensor_f32("w", &[1], &[1.0]);
        t.raw_data.push(0);
        let e = convert_tensor(&mut t).unwrap_err().to_string();
        assert!(e.contains("'w'") && e.contains("whole number"), "{e}");
    }
}
