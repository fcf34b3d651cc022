//! `.npz` archives (numpy's zip of `.npy` files, one per named array): read, and write
//! atomically.

use super::npy;
use crate::atomic_file::write_atomic;
use crate::tensor::HostTensor;
use anyhow::{bail, Context, Result};
use std::io::{Cursor, Read, Write};
use std::path::Path;
use zip::write::SimpleFileOptions;

/// Encodes named tensors as `.npz` bytes (stored, uncompressed, as `np.savez` does).
pub fn encode(tensors: &[HostTensor]) -> Result<Vec<u8>> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(tensors.iter().map(|t| t.byte_len()).sum::<usize>() > (1 << 31));
    for t in tensors {
        zip.start_file(format!("{}.npy", t.name), options)?;
        zip.write_all(&npy::encode(t))?;
    }
    Ok(zip.finish()?.into_inner())
}

/// Writes named tensors to `path` as `.npz` (temporary file + rename).
pub fn save(path: &Path, tensors: &[HostTensor]) -> Result<()> {
    let bytes = encode(tensors).with_context(|| format!("{}: cannot encode", path.display()))?;
    write_atomic(path, &bytes)
}

/// Decodes `.npz` bytes; `what` names the source in errors. Arrays keep the archive's order.
pub fn decode(bytes: &[u8], what: &str) -> Result<Vec<HostTensor>> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .with_context(|| format!("{what}: not an .npz (zip) archive"))?;
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut file = zip
            .by_index(i)
            .with_context(|| format!("{what}: cannot read entry {i}"))?;
        let entry = file.name().to_string();
        let Some(name) = entry.strip_suffix(".npy") else {
            bail!("{what}: entry '{entry}' is not an .npy array");
        };
        let mut data = Vec::with_capacity(file.size() as usize);
        file.read_to_end(&mut data)
            .with_context(|| format!("{what}: cannot read entry '{entry}'"))?;
        out.push(npy::decode(name, &data, &format!("{what}:{entry}"))?);
    }
    Ok(out)
}

/// Reads a `.npz` file, or a single `.npy` file (its array named after the file stem).
pub fn load(path: &Path) -> Result<Vec<HostTensor>> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    load_bytes(path, &bytes)
}

/// [`load`] for a file's bytes already in memory (`path` tells `.npy` from `.npz` and names
/// the source in errors).
pub(crate) fn load_bytes(path: &Path, bytes: &[u8]) -> Result<Vec<HostTensor>> {
    let what = path.display().to_string();
    if path.extension().is_some_and(|e| e == "npy") {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(vec![npy::decode(&stem, bytes, &what)?]);
    }
    decode(bytes, &what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorData;

    #[test]
    fn saves_and_loads_named_arrays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.npz");
        let a = HostTensor::new("logits", vec![2, 3], TensorData::F32(vec![1.0; 6])).unwrap();
        let b = HostTensor::new("ids", vec![2], TensorData::I64(vec![7, 9])).unwrap();
        save(&path, &[a.clone(), b.clone()]).unwrap();
        assert_eq!(load(&path).unwrap(), vec![a.clone(), b]);
        let single = dir.path().join("logits.npy");
        std::fs::write(&single, npy::encode(&a)).unwrap();
        assert_eq!(load(&single).unwrap(), vec![a]);
        let bad = dir.path().join("bad.npz");
        std::fs::write(&bad, b"garbage").unwrap();
        let e = format!("{:#}", load(&bad).unwrap_err());
        assert!(e.contains("bad.npz") && e.contains("not an .npz"), "{e}");
    }
}
