//! Initializers whose bytes live in external data files, resolved relative to the model file.
//!
//! Everything here works on protobuf tensors and the model's folder, not on
//! [`OnnxModel`](super::OnnxModel): the model layer calls in, never the other way.

use super::dtype::packed_bytes;
use super::pb::tensor_proto::DataLocation;
use super::pb::{GraphProto, TensorProto};
use anyhow::{bail, Context, Result};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

/// Where one initializer's bytes are stored outside the model file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExternalRef {
    /// The data file, relative to the model's folder, as written in the model.
    pub location: String,
    /// Byte offset of the tensor in that file.
    pub(crate) offset: u64,
    /// Number of bytes; computed from dims and dtype when the model does not say.
    pub length: u64,
}

/// True when `tensor` keeps its data in an external file.
pub(crate) fn is_external(tensor: &TensorProto) -> bool {
    tensor.data_location == Some(DataLocation::External as i32)
}

/// Number of elements of a tensor, from its dims (pinned at `u64::MAX` where the product
/// overflows).
pub(crate) fn element_count(tensor: &TensorProto) -> u64 {
    tensor
        .dims
        .iter()
        .fold(1u64, |n, &d| n.saturating_mul(d.max(0) as u64))
}

/// Parses the `external_data` key/value list of an external tensor.
pub(crate) fn external_ref(tensor: &TensorProto) -> Result<ExternalRef> {
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for entry in &tensor.external_data {
        let parse = |v: &str| -> Result<u64> {
            v.parse().with_context(|| {
                format!(
                    "initializer '{}': external data {} '{v}' is not a number",
                    tensor.name, entry.key
                )
            })
        };
        match entry.key.as_str() {
            "location" => location = Some(entry.value.clone()),
            "offset" => offset = parse(&entry.value)?,
            "length" => length = Some(parse(&entry.value)?),
            _ => {}
        }
    }
    let Some(location) = location else {
        bail!(
            "initializer '{}' is marked external but names no location",
            tensor.name
        );
    };
    let length = match length {
        Some(l) => l,
        None => packed_bytes(tensor.data_type, element_count(tensor)).with_context(|| {
            format!(
                "initializer '{}': external data without a length for a variable-size type",
                tensor.name
            )
        })?,
    };
    Ok(ExternalRef {
        location,
        offset,
        length,
    })
}

/// Resolves an external location against the model folder, refusing paths that escape it:
/// written as absolute or with `..`, or reaching outside through a link (the data file's
/// canonical path must lie under the folder's). Returns the canonical path of a file that
/// exists (what is then opened), the joined path of one that does not (the caller says it is
/// missing).
fn resolve(base: &Path, tensor: &TensorProto, location: &str) -> Result<PathBuf> {
    let rel = Path::new(location);
    if rel.is_absolute() || rel.components().any(|c| matches!(c, Component::ParentDir)) {
        bail!(
            "initializer '{}': external data location '{location}' must be a relative path inside the model's folder",
            tensor.name
        );
    }
    let path = base.join(rel);
    let Ok(real) = path.canonicalize() else {
        return Ok(path);
    };
    let folder = base
        .canonicalize()
        .with_context(|| format!("{}: cannot resolve the model's folder", base.display()))?;
    if !real.starts_with(&folder) {
        bail!(
            "initializer '{}': external data '{}' leads outside the model's folder (to '{}', through a link); copy the data file beside the model",
            tensor.name,
            path.display(),
            real.display()
        );
    }
    Ok(real)
}

/// The end of `r`'s bytes in a data file of `size` bytes, refused when the offset and length
/// overflow or pass the file's end.
fn checked_end(tensor: &TensorProto, r: &ExternalRef, file: &Path, size: u64) -> Result<u64> {
    let Some(end) = r.offset.checked_add(r.length) else {
        bail!(
            "initializer '{}': external data offset {} plus length {} overflows (file '{}')",
            tensor.name,
            r.offset,
            r.length,
            file.display()
        );
    };
    if end > size {
        bail!(
            "initializer '{}': external data file '{}' is too short: needs {} bytes at offset {}, the file has {size}",
            tensor.name,
            file.display(),
            r.length,
            r.offset
        );
    }
    Ok(end)
}

/// The size of the external data file at `file` for `tensor`, refused when it is missing or
/// not a file.
fn data_file_size(tensor: &TensorProto, file: &Path) -> Result<u64> {
    match std::fs::metadata(file) {
        Ok(m) if m.is_file() => Ok(m.len()),
        Ok(_) => bail!(
            "initializer '{}': external data '{}' is not a file",
            tensor.name,
            file.display()
        ),
        Err(_) => bail!(
            "initializer '{}': external data file '{}' is missing (it must sit beside the model)",
            tensor.name,
            file.display()
        ),
    }
}

/// Checks that every external data file of `graph` exists in `base` (the model's folder),
/// stays inside it and is long enough; reads nothing.
pub(crate) fn check_external_data(graph: &GraphProto, base: &Path) -> Result<()> {
    for tensor in graph.initializer.iter().filter(|t| is_external(t)) {
        let r = external_ref(tensor)?;
        let file = resolve(base, tensor, &r.location)?;
        checked_end(tensor, &r, &file, data_file_size(tensor, &file)?)?;
    }
    Ok(())
}

/// The data files the external initializers of `graph` name, relative to the model's folder,
/// each once, in the order first named.
pub(crate) fn data_file_locations(graph: &GraphProto) -> Result<Vec<String>> {
    let mut out: Vec<String> = vec![];
    for tensor in graph.initializer.iter().filter(|t| is_external(t)) {
        let location = external_ref(tensor)?.location;
        if !out.contains(&location) {
            out.push(location);
        }
    }
    Ok(out)
}

/// Reads the bytes of one external initializer, its location resolved against `base` (the
/// model's folder).
pub(crate) fn read_external(base: &Path, tensor: &TensorProto) -> Result<Vec<u8>> {
    let r = external_ref(tensor)?;
    let path = resolve(base, tensor, &r.location)?;
    checked_end(tensor, &r, &path, data_file_size(tensor, &path)?)?;
    let mut file =
        std::fs::File::open(&path).with_context(|| format!("{}: cannot open", path.display()))?;
    file.seek(SeekFrom::Start(r.offset)).with_context(|| {
        format!(
            "{}: cannot seek for initializer '{}'",
            path.display(),
            tensor.name
        )
    })?;
    let mut buf = Vec::with_capacity(usize::try_from(r.length)?);
    (&mut file)
        .take(r.length)
        .read_to_end(&mut buf)
        .with_context(|| {
            format!(
                "{}: cannot read initializer '{}'",
                path.display(),
                tensor.name
            )
        })?;
    if buf.len() as u64 != r.length {
        bail!(
            "{}: too short for initializer '{}'",
            path.display(),
            tensor.name
        );
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::pb::StringStringEntryProto;

    fn ext_tensor(location: &str, len: Option<&str>) -> TensorProto {
        let mut entries = vec![StringStringEntryProto {
            key: "location".into(),
            value: location.into(),
        }];
        if let Some(l) = len {
            entries.push(StringStringEntryProto {
                key: "length".into(),
                value: l.into(),
            });
        }
        TensorProto {
            name: "w".into(),
            dims: vec![2, 3],
            data_type: 1,
            data_location: Some(DataLocation::External as i32),
            external_data: entries,
            ..Default::default()
        }
    }

    #[test]
    fn length_defaults_to_dims_times_dtype() {
        let r = external_ref(&ext_tensor("w.bin", None)).unwrap();
        assert_eq!(
            r,
            ExternalRef {
                location: "w.bin".into(),
                offset: 0,
                length: 24
            }
        );
        assert_eq!(
            external_ref(&ext_tensor("w.bin", Some("8")))
                .unwrap()
                .length,
            8
        );
        assert!(external_ref(&ext_tensor("w.bin", Some("x"))).is_err());
    }

    #[test]
    fn escaping_locations_are_refused() {
        let t = ext_tensor("../w.bin", None);
        assert!(resolve(Path::new("/models"), &t, "../w.bin").is_err());
        assert!(resolve(Path::new("/models"), &t, "/etc/passwd").is_err());
        assert!(resolve(Path::new("/models"), &t, "sub/w.bin").is_ok());
    }
}
