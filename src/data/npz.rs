//! `.npz` archives (numpy's zip of `.npy` files, one per named array): read, and write
//! atomically.

use super::decode_budget::DecodeBudget;
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
///
/// Sizes come from the zip's central directory and are checked before anything is
/// allocated: a stored entry may not claim more than the archive holds, compressed entries
/// together may not inflate past the [`DecodeBudget`], and every entry is read through a
/// bound, so a header that lies about its size cannot make the inflate run away.
pub fn decode(bytes: &[u8], what: &str) -> Result<Vec<HostTensor>> {
    let budget = DecodeBudget::current()?;
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .with_context(|| format!("{what}: not an .npz (zip) archive"))?;
    let mut out = Vec::with_capacity(zip.len());
    let mut inflated = 0u64;
    for i in 0..zip.len() {
        let file = zip
            .by_index(i)
            .with_context(|| format!("{what}: cannot read entry {i}"))?;
        let entry = file.name().to_string();
        let Some(name) = entry.strip_suffix(".npy") else {
            bail!("{what}: entry '{entry}' is not an .npy array");
        };
        let size = file.size();
        let thing = format!("entry '{entry}'");
        if file.compression() == zip::CompressionMethod::Stored {
            check_stored(
                size,
                file.compressed_size(),
                bytes.len() as u64,
                what,
                &thing,
            )?;
        } else {
            inflated = inflated.saturating_add(size);
            budget.check(inflated, what, &format!("{thing} inflates to"))?;
        }
        let data = read_bounded(file, size, what, &thing)?;
        out.push(npy::decode(name, &data, &format!("{what}:{entry}"))?);
    }
    Ok(out)
}

/// Refuses a stored (uncompressed) entry whose sizes disagree or pass the archive's end.
fn check_stored(size: u64, stored: u64, archive: u64, what: &str, thing: &str) -> Result<()> {
    if size != stored {
        bail!("{what}: {thing} is stored uncompressed, yet its header says {size} bytes and {stored} stored");
    }
    if size > archive {
        bail!("{what}: {thing} claims {size} bytes, more than the whole archive ({archive} bytes)");
    }
    Ok(())
}

/// Reads an entry that declares `size` bytes, never more than `size + 1` of them, and refuses
/// it unless exactly `size` came out.
fn read_bounded(file: impl Read, size: u64, what: &str, thing: &str) -> Result<Vec<u8>> {
    let mut data = Vec::with_capacity(usize::try_from(size)?);
    file.take(size.saturating_add(1))
        .read_to_end(&mut data)
        .with_context(|| format!("{what}: cannot read {thing}"))?;
    match (data.len() as u64).cmp(&size) {
        std::cmp::Ordering::Greater => {
            bail!("{what}: {thing} inflates past the {size} bytes its header declares")
        }
        std::cmp::Ordering::Less => bail!(
            "{what}: {thing} ends after {} of the {size} bytes its header declares",
            data.len()
        ),
        std::cmp::Ordering::Equal => Ok(data),
    }
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
