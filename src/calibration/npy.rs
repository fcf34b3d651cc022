//! A small reader for NumPy `.npy` files of float32/float64 (C order), for calibration data.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::Path;

/// What a `.npy` header says.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyHeader {
    /// `<f4` or `<f8`.
    pub descr: String,
    /// Dims.
    pub shape: Vec<usize>,
    /// Byte offset of the data.
    pub data_offset: usize,
}

fn parse_header(bytes: &[u8]) -> Result<NpyHeader> {
    if !bytes.starts_with(b"\x93NUMPY") || bytes.len() < 10 {
        bail!("not a .npy file (no \\x93NUMPY magic)");
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => bail!("unsupported .npy version {v}"),
    };
    let Some(text) = bytes.get(start..start + len) else {
        bail!("the .npy header is truncated");
    };
    let text = String::from_utf8_lossy(text);
    let field = |key: &str| -> Result<String> {
        let at = text
            .find(&format!("'{key}'"))
            .with_context(|| format!("the .npy header has no '{key}'"))?;
        let rest = text[at + key.len() + 2..].trim_start();
        let rest = rest.strip_prefix(':').unwrap_or(rest).trim_start();
        Ok(rest.to_string())
    };
    let descr = field("descr")?;
    let descr = descr
        .trim_start_matches('\'')
        .split('\'')
        .next()
        .unwrap_or("")
        .to_string();
    if field("fortran_order")?.starts_with("True") {
        bail!("Fortran-ordered arrays are not supported; save with np.ascontiguousarray");
    }
    let shape = field("shape")?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .context("the .npy header's shape is malformed")?;
    let shape = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .context("the .npy header's shape is malformed")
        })
        .collect::<Result<Vec<_>>>()?;
    if descr != "<f4" && descr != "<f8" {
        bail!("element type {descr:?} is not supported (expected float32 '<f4' or float64 '<f8')");
    }
    Ok(NpyHeader {
        descr,
        shape,
        data_offset: start + len,
    })
}

/// Reads only the header of a `.npy` file.
pub fn read_header(path: &Path) -> Result<NpyHeader> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let mut head = vec![0u8; 4096];
    let n = f
        .read(&mut head)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    parse_header(&head[..n]).with_context(|| path.display().to_string())
}

/// Reads a `.npy` file as float32 values with its shape.
pub fn read_f32(path: &Path) -> Result<(Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let h = parse_header(&bytes).with_context(|| path.display().to_string())?;
    let count: usize = h.shape.iter().product();
    let size = if h.descr == "<f4" { 4 } else { 8 };
    let data = &bytes[h.data_offset..];
    if data.len() < count * size {
        bail!(
            "{}: truncated: shape {:?} needs {} bytes of data, the file has {}",
            path.display(),
            h.shape,
            count * size,
            data.len()
        );
    }
    let values = if size == 4 {
        data.chunks_exact(4)
            .take(count)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    } else {
        data.chunks_exact(8)
            .take(count)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()) as f32)
            .collect()
    };
    Ok((h.shape, values))
}

/// Writes a float32 `.npy` file (atomically); used by tests and by `--save` helpers.
pub fn write_f32(path: &Path, shape: &[usize], values: &[f32]) -> Result<()> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape_text}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    crate::atomic_file::write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        write_f32(&p, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        assert_eq!(read_header(&p).unwrap().shape, vec![2, 3]);
        let (shape, v) = read_f32(&p).unwrap();
        assert_eq!(shape, vec![2, 3]);
        assert_eq!(v[5], 6.0);
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 4]).unwrap();
        assert!(format!("{:#}", read_f32(&p).unwrap_err()).contains("truncated"));
        std::fs::write(&p, b"hello").unwrap();
        assert!(format!("{:#}", read_f32(&p).unwrap_err()).contains("not a .npy"));
    }
}
