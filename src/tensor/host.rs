//! Element types and host tensors: what every backend takes as input and gives back as output.

use anyhow::{bail, Result};
use half::f16;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of a host tensor (the subset of ONNX types trtkit moves between backends).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElemType {
    /// IEEE float32.
    F32,
    /// IEEE float16.
    F16,
    /// float64.
    F64,
    /// int64.
    I64,
    /// int32.
    I32,
    /// int8.
    I8,
    /// uint8.
    U8,
    /// bool.
    Bool,
}

impl ElemType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            ElemType::F64 | ElemType::I64 => 8,
            ElemType::F32 | ElemType::I32 => 4,
            ElemType::F16 => 2,
            ElemType::I8 | ElemType::U8 | ElemType::Bool => 1,
        }
    }

    /// Whether this is a floating-point type.
    pub(crate) fn is_float(self) -> bool {
        matches!(self, ElemType::F32 | ElemType::F16 | ElemType::F64)
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            ElemType::F32 => "float32",
            ElemType::F16 => "float16",
            ElemType::F64 => "float64",
            ElemType::I64 => "int64",
            ElemType::I32 => "int32",
            ElemType::I8 => "int8",
            ElemType::U8 => "uint8",
            ElemType::Bool => "bool",
        };
        f.write_str(s)
    }
}

/// The elements of a host tensor, in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    /// float32 elements.
    F32(Vec<f32>),
    /// float16 elements.
    F16(Vec<f16>),
    /// float64 elements.
    F64(Vec<f64>),
    /// int64 elements.
    I64(Vec<i64>),
    /// int32 elements.
    I32(Vec<i32>),
    /// int8 elements.
    I8(Vec<i8>),
    /// uint8 elements.
    U8(Vec<u8>),
    /// bool elements.
    Bool(Vec<bool>),
}

impl TensorData {
    /// The elements as little-endian bytes, the layout a device buffer takes.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        fn bytes<T, const N: usize>(v: &[T], f: impl Fn(&T) -> [u8; N]) -> Vec<u8> {
            v.iter().flat_map(f).collect()
        }
        match self {
            TensorData::F32(v) => bytes(v, |x| x.to_le_bytes()),
            TensorData::F16(v) => bytes(v, |x| x.to_le_bytes()),
            TensorData::F64(v) => bytes(v, |x| x.to_le_bytes()),
            TensorData::I64(v) => bytes(v, |x| x.to_le_bytes()),
            TensorData::I32(v) => bytes(v, |x| x.to_le_bytes()),
            TensorData::I8(v) => bytes(v, |x| x.to_le_bytes()),
            TensorData::U8(v) => v.clone(),
            TensorData::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
        }
    }

    /// Elements of type `t` from little-endian bytes; a trailing partial element is ignored
    /// (callers check the length against the shape).
    pub fn from_le_bytes(t: ElemType, bytes: &[u8]) -> TensorData {
        fn le<T, const N: usize>(bytes: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
            bytes
                .chunks_exact(N)
                .map(|c| f(c.try_into().expect("chunks_exact gives N bytes")))
                .collect()
        }
        match t {
            ElemType::F32 => TensorData::F32(le(bytes, f32::from_le_bytes)),
            ElemType::F16 => TensorData::F16(le(bytes, f16::from_le_bytes)),
            ElemType::F64 => TensorData::F64(le(bytes, f64::from_le_bytes)),
            ElemType::I64 => TensorData::I64(le(bytes, i64::from_le_bytes)),
            ElemType::I32 => TensorData::I32(le(bytes, i32::from_le_bytes)),
            ElemType::I8 => TensorData::I8(le(bytes, i8::from_le_bytes)),
            ElemType::U8 => TensorData::U8(bytes.to_vec()),
            ElemType::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
        }
    }

    /// The element type.
    pub fn elem_type(&self) -> ElemType {
        match self {
            TensorData::F32(_) => ElemType::F32,
            TensorData::F16(_) => ElemType::F16,
            TensorData::F64(_) => ElemType::F64,
            TensorData::I64(_) => ElemType::I64,
            TensorData::I32(_) => ElemType::I32,
            TensorData::I8(_) => ElemType::I8,
            TensorData::U8(_) => ElemType::U8,
            TensorData::Bool(_) => ElemType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::F16(v) => v.len(),
            TensorData::F64(v) => v.len(),
            TensorData::I64(v) => v.len(),
            TensorData::I32(v) => v.len(),
            TensorData::I8(v) => v.len(),
            TensorData::U8(v) => v.len(),
            TensorData::Bool(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All elements as f32: borrowed when they are f32 already, converted otherwise (for
    /// metrics that read large float outputs, such as detection heads, without a copy).
    pub(crate) fn as_f32(&self) -> std::borrow::Cow<'_, [f32]> {
        match self {
            TensorData::F32(v) => std::borrow::Cow::Borrowed(v),
            TensorData::F16(v) => v.iter().map(|&x| x.to_f32()).collect(),
            other => other.to_f64().into_iter().map(|x| x as f32).collect(),
        }
    }

    /// All elements widened to f64 (for metrics that compare any two numeric outputs).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F16(v) => v.iter().map(|&x| x.to_f64()).collect(),
            TensorData::F64(v) => v.clone(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8 as f64).collect(),
        }
    }
}

/// A named tensor in host memory.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    /// Tensor name in the model.
    pub name: String,
    /// Concrete dims.
    pub shape: Vec<usize>,
    /// Elements, row-major.
    pub data: TensorData,
}

impl HostTensor {
    /// Builds a tensor, checking that the shape and the element count agree.
    pub fn new(name: impl Into<String>, shape: Vec<usize>, data: TensorData) -> Result<Self> {
        let name = name.into();
        let expected: usize = shape.iter().product();
        if expected != data.len() {
            bail!(
                "tensor '{name}': shape {shape:?} needs {expected} elements, got {}",
                data.len()
            );
        }
        Ok(HostTensor { name, shape, data })
    }

    /// The element type.
    pub fn elem_type(&self) -> ElemType {
        self.data.elem_type()
    }

    /// Size of the data in bytes.
    pub(crate) fn byte_len(&self) -> usize {
        self.data.len() * self.elem_type().size()
    }

    /// The elements as little-endian bytes, the layout a device buffer takes.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.data.to_le_bytes()
    }

    /// A tensor of `elem` elements read from little-endian bytes (a device buffer's layout);
    /// the byte count must be the shape's element count times the element size.
    pub fn from_le_bytes(
        name: impl Into<String>,
        shape: Vec<usize>,
        elem: ElemType,
        bytes: &[u8],
    ) -> Result<Self> {
        let name = name.into();
        let need = shape.iter().product::<usize>() * elem.size();
        if bytes.len() != need {
            bail!(
                "tensor '{name}': shape {shape:?} of {elem} takes {need} bytes, got {}",
                bytes.len()
            );
        }
        HostTensor::new(name, shape, TensorData::from_le_bytes(elem, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_must_match_data() {
        assert!(HostTensor::new("x", vec![2, 3], TensorData::F32(vec![0.0; 6])).is_ok());
        let err = HostTensor::new("x", vec![2, 3], TensorData::F32(vec![0.0; 5])).unwrap_err();
        assert!(err.to_string().contains("'x'"));
        let t = HostTensor::new("h", vec![2], TensorData::F16(vec![f16::ONE, f16::ZERO])).unwrap();
        assert_eq!(t.to_le_bytes(), vec![0x00, 0x3c, 0, 0]);
        assert_eq!(t.to_le_bytes().len(), t.byte_len());
    }

    #[test]
    fn bytes_round_trip_for_every_type() {
        let cases = [
            TensorData::F32(vec![1.5, -2.0]),
            TensorData::F16(vec![f16::from_f32(0.5), f16::from_f32(-3.0)]),
            TensorData::F64(vec![1e300, -0.25]),
            TensorData::I64(vec![-1, i64::MAX]),
            TensorData::I32(vec![-7, 9]),
            TensorData::I8(vec![-128, 127]),
            TensorData::U8(vec![0, 255]),
            TensorData::Bool(vec![true, false]),
        ];
        for data in cases {
            let t = HostTensor::new("t", vec![2], data).unwrap();
            let bytes = t.to_le_bytes();
            assert_eq!(bytes.len(), t.byte_len());
            let back = HostTensor::from_le_bytes("t", vec![2], t.elem_type(), &bytes).unwrap();
            assert_eq!(back, t);
        }
        let err = HostTensor::from_le_bytes("o", vec![3], ElemType::F32, &[0; 8]).unwrap_err();
        assert!(err.to_string().contains("takes 12 bytes, got 8"), "{err}");
    }
}
