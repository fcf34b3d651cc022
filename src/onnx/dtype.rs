//! ONNX element types: names and sizes, so the rest of the crate never matches on raw `i32`s.

use super::pb::tensor_proto::DataType;
use crate::tensor::ElemType;

/// The element type a proto's `i32` code stands for; `None` for codes this ONNX version lacks.
///
/// Proto fields stay `i32`; code that decides on a type converts here and matches on the enum.
pub fn data_type(code: i32) -> Option<DataType> {
    DataType::try_from(code).ok()
}

/// The element type an `i64` attribute (a Cast's `to`, a random op's `dtype`) stands for.
pub(crate) fn data_type_attr(code: i64) -> Option<DataType> {
    i32::try_from(code).ok().and_then(data_type)
}

/// Short lower-case name of an ONNX element type (`float32`, `int64`, …), as users read it.
pub(crate) fn dtype_name(code: i32) -> String {
    match DataType::try_from(code) {
        Ok(DataType::Float) => "float32".into(),
        Ok(DataType::Float16) => "float16".into(),
        Ok(DataType::Double) => "float64".into(),
        Ok(DataType::Bfloat16) => "bfloat16".into(),
        Ok(DataType::Undefined) => "undefined".into(),
        Ok(other) => other.as_str_name().to_ascii_lowercase(),
        // Added after the ONNX version trtkit's decoder was generated from (IR 12 to 14).
        Err(_) => match code {
            24 => "float8e8m0".into(),
            25 => "uint2".into(),
            26 => "int2".into(),
            27 => "float6e2m3".into(),
            28 => "float6e3m2".into(),
            _ => format!("dtype#{code}"),
        },
    }
}

/// The host element type of an ONNX element type code; `None` for types trtkit does not carry.
pub fn elem_type(code: i32) -> Option<ElemType> {
    Some(match DataType::try_from(code).ok()? {
        DataType::Float => ElemType::F32,
        DataType::Float16 => ElemType::F16,
        DataType::Double => ElemType::F64,
        DataType::Int64 => ElemType::I64,
        DataType::Int32 => ElemType::I32,
        DataType::Int8 => ElemType::I8,
        DataType::Uint8 => ElemType::U8,
        DataType::Bool => ElemType::Bool,
        _ => return None,
    })
}

/// Size in bits of one element of an ONNX element type; `None` for strings and unknown codes.
pub(crate) fn dtype_bits(code: i32) -> Option<u64> {
    use DataType::*;
    let bits = match DataType::try_from(code).ok()? {
        Float | Int32 | Uint32 => 32,
        Double | Int64 | Uint64 | Complex64 => 64,
        Complex128 => 128,
        Float16 | Bfloat16 | Int16 | Uint16 => 16,
        Int8 | Uint8 | Bool | Float8e4m3fn | Float8e4m3fnuz | Float8e5m2 | Float8e5m2fnuz => 8,
        Int4 | Uint4 | Float4e2m1 => 4,
        String | Undefined => return None,
    };
    Some(bits)
}

/// Bytes taken by `count` elements of `code` when packed as ONNX raw data.
pub(crate) fn packed_bytes(code: i32, count: u64) -> Option<u64> {
    dtype_bits(code).map(|bits| (count * bits).div_ceil(8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sizes() {
        assert_eq!(dtype_name(DataType::Float as i32), "float32");
        assert_eq!(dtype_name(DataType::Int64 as i32), "int64");
        assert_eq!(dtype_name(999), "dtype#999");
        assert_eq!(dtype_name(27), "float6e2m3");
        assert_eq!(elem_type(DataType::Float as i32), Some(ElemType::F32));
        assert_eq!(elem_type(DataType::String as i32), None);
        assert_eq!(packed_bytes(DataType::Float as i32, 10), Some(40));
        assert_eq!(packed_bytes(DataType::Int4 as i32, 3), Some(2));
        assert_eq!(packed_bytes(DataType::String as i32, 3), None);
        assert_eq!(data_type(1), Some(DataType::Float));
        assert_eq!(data_type(999), None);
        assert_eq!(data_type_attr(10), Some(DataType::Float16));
        assert_eq!(data_type_attr(1 << 40), None);
    }
}
