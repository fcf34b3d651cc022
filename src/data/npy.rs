//! A small reader and writer for numpy's `.npy` format (versions 1.0 to 3.0, C order,
//! little-endian), enough to move host tensors to and from Python.

use crate::tensor::{ElemType, HostTensor, TensorData};
use anyhow::{bail, Context, Result};

const MAGIC: &[u8] = b"\x93NUMPY";

fn descr(t: ElemType) -> &'static str {
    match t {
        ElemType::F32 => "<f4",
        ElemType::F16 => "<f2",
        ElemType::F64 => "<f8",
        ElemType::I64 => "<i8",
        ElemType::I32 => "<i4",
        ElemType::I8 => "|i1",
        ElemType::U8 => "|u1",
        ElemType::Bool => "|b1",
    }
}

fn elem_of_descr(d: &str) -> Option<ElemType> {
    Some(match d {
        "<f4" => ElemType::F32,
        "<f2" => ElemType::F16,
        "<f8" => ElemType::F64,
        "<i8" => ElemType::I64,
        "<i4" => ElemType::I32,
        "|i1" | "<i1" => ElemType::I8,
        "|u1" | "<u1" => ElemType::U8,
        "|b1" => ElemType::Bool,
        _ => return None,
    })
}

/// Encodes a tensor as `.npy` bytes (format 1.0, or 2.0 when the header needs it).
pub fn encode(t: &HostTensor) -> Vec<u8> {
    let mut out = header(t.elem_type(), &t.shape);
    out.extend(t.to_le_bytes());
    out
}

/// The `.npy` header of an array of `elem` values shaped `shape`, up to where its data starts.
pub(crate) fn header(elem: ElemType, shape: &[usize]) -> Vec<u8> {
    let shape = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr(elem)
    );
    let small = MAGIC.len() + 2 + 2 + header.len() < u16::MAX as usize;
    let prefix = MAGIC.len() + 2 + if small { 2 } else { 4 };
    let total = (prefix + header.len() + 1).div_ceil(64) * 64;
    header.push_str(&" ".repeat(total - prefix - header.len() - 1));
    header.push('\n');
    let mut out = MAGIC.to_vec();
    if small {
        out.extend([1, 0]);
        out.extend((header.len() as u16).to_le_bytes());
    } else {
        out.extend([2, 0]);
        out.extend((header.len() as u32).to_le_bytes());
    }
    out.extend(header.as_bytes());
    out
}

fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')')? + 1
    } else {
        rest.find([',', '}'])?
    };
    Some(rest[..end].trim())
}

/// Decodes `.npy` bytes into a tensor called `name`; `what` names the source in errors.
pub fn decode(name: &str, bytes: &[u8], what: &str) -> Result<HostTensor> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        bail!("{what}: not an .npy file (bad magic)");
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize,
            12,
        ),
        v => bail!("{what}: .npy format version {v} is not supported"),
    };
    let header = bytes
        .get(start..start + hlen)
        .and_then(|h| std::str::from_utf8(h).ok())
        .with_context(|| format!("{what}: truncated or unreadable .npy header"))?;
    let d = dict_value(header, "descr")
        .map(|s| s.trim_matches(['\'', '"']))
        .with_context(|| format!("{what}: .npy header has no 'descr'"))?;
    let elem = elem_of_descr(d).with_context(|| {
        format!("{what}: dtype '{d}' is not supported (float16/32/64, int8/32/64, uint8, bool, little-endian)")
    })?;
    if dict_value(header, "fortran_order") == Some("True") {
        bail!("{what}: Fortran-ordered arrays are not supported; save with np.ascontiguousarray");
    }
    let shape_text = dict_value(header, "shape")
        .with_context(|| format!("{what}: .npy header has no 'shape'"))?;
    let shape = shape_text
        .trim_matches(['(', ')'])
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| anyhow::anyhow!("{what}: bad shape {shape_text} in the .npy header"))?;
    let body = &bytes[start + hlen..];
    let need = shape
        .iter()
        .try_fold(elem.size(), |n, &d| n.checked_mul(d))
        .with_context(|| {
            format!("{what}: shape {shape:?} of {elem} is too large (its byte count overflows)")
        })?;
    if body.len() != need {
        bail!(
            "{what}: shape {shape:?} of {elem} needs {need} bytes, the file has {}",
            body.len()
        );
    }
    HostTensor::new(name, shape, TensorData::from_le_bytes(elem, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn round_trips_every_type() {
        let cases = vec![
            TensorData::F32(vec![1.5, -2.0, 3.25, 0.0, 1e-7, 7.0]),
            TensorData::F16(vec![f16::from_f32(0.5); 6]),
            TensorData::F64(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            TensorData::I64(vec![-1, 2, -3, 4, -5, i64::MAX]),
            TensorData::I32(vec![-1, 2, -3, 4, -5, 6]),
            TensorData::I8(vec![-1, 2, -3, 4, -5, 6]),
            TensorData::U8(vec![1, 2, 3, 4, 5, 255]),
            TensorData::Bool(vec![true, false, true, false, true, true]),
        ];
        for data in cases {
            let t = HostTensor::new("x", vec![2, 3], data).unwrap();
            let bytes = encode(&t);
            assert_eq!(&bytes[..6], MAGIC);
            let header_end = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!(header_end % 64, 0);
            assert_eq!(decode("x", &bytes, "t.npy").unwrap(), t);
        }
        let scalar = HostTensor::new("s", vec![], TensorData::F32(vec![4.0])).unwrap();
        assert_eq!(decode("s", &encode(&scalar), "s.npy").unwrap(), scalar);
        let vec1 = HostTensor::new("v", vec![3], TensorData::I64(vec![1, 2, 3])).unwrap();
        assert_eq!(decode("v", &encode(&vec1), "v.npy").unwrap(), vec1);
    }

    #[test]
    fn reads_a_numpy_written_header() {
        // Header as numpy 1.x/2.x writes it for np.arange(3, dtype='<i4').
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let mut h = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }".to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        bytes.extend((h.len() as u16).to_le_bytes());
        bytes.extend(h.as_bytes());
        for v in [0i32, 1, 2] {
            bytes.extend(v.to_le_bytes());
        }
        let t = decode("a", &bytes, "a.npy").unwrap();
        assert_eq!(t.shape, vec![3]);
        assert_eq!(t.data, TensorData::I32(vec![0, 1, 2]));
    }

    #[test]
    fn rejects_bad_files_with_the_name() {
        let e = decode("x", b"not numpy at all", "bad.npy").unwrap_err();
        assert!(e.to_string().contains("bad.npy"));
        let t = HostTensor::new("x", vec![4], TensorData::F32(vec![1.0; 4])).unwrap();
        let mut bytes = encode(&t);
        bytes.truncate(bytes.len() - 3);
        let e = decode("x", &bytes, "short.npy").unwrap_err().to_string();
        assert!(
            e.contains("short.npy") && e.contains("needs 16 bytes"),
            "{e}"
        );
        let mut fortran = encode(&t);
        let at = fortran.windows(5).position(|w| w == b"False").unwrap();
        fortran[at..at + 5].copy_from_slice(b"True ");
        let e = decode("x", &fortran, "f.npy").unwrap_err();
        assert!(e.to_string().contains("Fortran"));
    }
}
