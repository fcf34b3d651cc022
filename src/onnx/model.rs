//! Loading and saving ONNX models, with clear errors for everything that is not one.

use super::deferred_weights::{decode_deferring, DeferredWeights};
use super::external::{check_external_data, element_count, is_external, read_external};
use super::initializer_data::check_initializer_data;
use super::pb::{GraphProto, ModelProto};
use crate::atomic_file::write_atomic;
use anyhow::{bail, Context, Result};
use prost::Message;
use std::path::{Path, PathBuf};

/// An ONNX model in memory, with the path it came from (external data resolves against it).
#[derive(Clone, Debug)]
pub struct OnnxModel {
    /// The decoded protobuf.
    pub proto: ModelProto,
    /// Where the model was read from, or where it will be saved.
    pub path: PathBuf,
}

/// What a file turned out to be when it is not an ONNX model, judged by its first bytes.
pub(crate) fn sniff_foreign_format(bytes: &[u8]) -> Option<&'static str> {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "a PNG image"),
        (b"\xff\xd8\xff", "a JPEG image"),
        (
            b"ftrt",
            "a TensorRT engine (load it with a TensorRT command, not as ONNX)",
        ),
        (
            b"vtrt",
            "a TensorRT-RTX engine (load it with a TensorRT command, not as ONNX)",
        ),
        (b"\x93NUMPY", "a NumPy .npy array"),
        (b"PK\x03\x04", "a zip archive (an .npz file?)"),
        (b"\x1f\x8b", "a gzip archive"),
        (b"\x7fELF", "an ELF executable"),
        (b"TRT-", "a TensorRT calibration cache"),
    ];
    SIGNATURES
        .iter()
        .find(|(magic, _)| bytes.starts_with(magic))
        .map(|(_, what)| *what)
}

/// Decodes and sanity-checks ONNX protobuf bytes; errors say what is wrong, without the path.
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto> {
    check_bytes(bytes)?;
    let proto = ModelProto::decode(bytes).map_err(decode_error)?;
    check_model(&proto)?;
    Ok(proto)
}

/// [`decode_model`], leaving the large float32 weights in `bytes` until
/// [`DeferredWeights::restore`] puts them back (see [`super::deferred_weights`]).
pub(crate) fn decode_model_deferring(bytes: &[u8]) -> Result<(ModelProto, DeferredWeights)> {
    check_bytes(bytes)?;
    let (proto, deferred) = decode_deferring(bytes).map_err(decode_error)?;
    check_model(&proto)?;
    Ok((proto, deferred))
}

fn check_bytes(bytes: &[u8]) -> Result<()> {
    if bytes.is_empty() {
        bail!("the file is empty");
    }
    if let Some(what) = sniff_foreign_format(bytes) {
        bail!("not an ONNX model: it is {what}");
    }
    Ok(())
}

fn decode_error(e: prost::DecodeError) -> anyhow::Error {
    anyhow::anyhow!("not a valid ONNX model (protobuf decoding failed: {e}); the file may be truncated or corrupted")
}

fn check_model(proto: &ModelProto) -> Result<()> {
    if proto.ir_version <= 0 {
        bail!("not a valid ONNX model: ir_version is missing (the file may be truncated, or not ONNX)");
    }
    if proto.opset_import.is_empty() {
        bail!("not a valid ONNX model: it imports no opset (the file may be truncated)");
    }
    let Some(graph) = &proto.graph else {
        bail!("not a valid ONNX model: it has no graph (the file may be truncated, or not ONNX)");
    };
    if graph.output.is_empty() {
        bail!("not a valid ONNX model: the graph has no outputs (the file may be truncated)");
    }
    check_graph_references(graph)?;
    super::graph_check::check_graph_structure(graph)
}

/// Every node input must be produced by a graph input, an initializer or an earlier node.
///
/// Subgraphs (If/Loop bodies) may reference outer names, so only the top level is checked
/// strictly; this catches truncation and bit flips that still decode as protobuf.
fn check_graph_references(graph: &GraphProto) -> Result<()> {
    use std::collections::HashSet;
    let mut known: HashSet<&str> = graph.input.iter().map(|v| v.name.as_str()).collect();
    known.extend(graph.initializer.iter().map(|t| t.name.as_str()));
    known.extend(
        graph
            .sparse_initializer
            .iter()
            .filter_map(|t| t.values.as_ref())
            .map(|t| t.name.as_str()),
    );
    for node in &graph.node {
        known.extend(node.output.iter().map(String::as_str));
    }
    for node in &graph.node {
        for input in &node.input {
            if !input.is_empty() && !known.contains(input.as_str()) {
                bail!(
                    "not a valid ONNX model: node '{}' ({}) reads '{}', which nothing produces",
                    node.name,
                    node.op_type,
                    input
                );
            }
        }
    }
    for output in &graph.output {
        if !known.contains(output.name.as_str()) {
            bail!(
                "not a valid ONNX model: graph output '{}' is produced by no node",
                output.name
            );
        }
    }
    Ok(())
}

impl OnnxModel {
    /// Reads, decodes and checks the model at `path`, including its external data files.
    ///
    /// Every error starts with the path, so the one-line message names the file.
    pub fn load(path: &Path) -> Result<Self> {
        Self::from_bytes(path, &read_model_file(path)?)
    }

    /// Decodes and checks the bytes of the model file at `path` (read or mapped by the caller).
    pub(crate) fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Self> {
        let proto = decode_model(bytes).with_context(|| path.display().to_string())?;
        Self::checked(path, proto, &DeferredWeights::default())
    }

    /// [`OnnxModel::from_bytes`] with its large float32 weights left in `bytes` until
    /// [`DeferredWeights::restore`] puts them back: for a caller that may never read them.
    pub(crate) fn from_bytes_deferring(
        path: &Path,
        bytes: &[u8],
    ) -> Result<(Self, DeferredWeights)> {
        let (proto, deferred) =
            decode_model_deferring(bytes).with_context(|| path.display().to_string())?;
        let model = Self::checked(path, proto, &deferred)?;
        Ok((model, deferred))
    }

    /// The decoded model, once each initializer's data fills its shape (`deferred`: the
    /// weights the decoder left in the file) and its external data files are there.
    fn checked(path: &Path, proto: ModelProto, deferred: &DeferredWeights) -> Result<Self> {
        let model = OnnxModel {
            proto,
            path: path.to_path_buf(),
        };
        let held = deferred.lengths();
        check_initializer_data(model.graph(), |i| held.get(&i).copied())
            .and_then(|()| check_external_data(model.graph(), &model.base_dir()))
            .with_context(|| path.display().to_string())?;
        Ok(model)
    }

    /// Wraps an in-memory model; `path` is where it is meant to live (for external data and saving).
    pub fn from_proto(proto: ModelProto, path: impl Into<PathBuf>) -> Self {
        OnnxModel {
            proto,
            path: path.into(),
        }
    }

    /// The main graph; a loaded model always has one.
    pub fn graph(&self) -> &GraphProto {
        self.proto
            .graph
            .as_ref()
            .expect("OnnxModel always holds a graph")
    }

    /// Parameters: the elements of every initializer of the main graph.
    pub fn parameters(&self) -> u64 {
        self.graph().initializer.iter().map(element_count).sum()
    }

    /// The main graph, mutable.
    pub(crate) fn graph_mut(&mut self) -> &mut GraphProto {
        self.proto.graph.get_or_insert_with(Default::default)
    }

    /// The folder that external data locations are relative to: the model file's own
    /// folder, a linked model's followed to the file it links to.
    pub fn base_dir(&self) -> PathBuf {
        model_folder(&self.path)
    }

    /// The default-domain opset version the model imports (0 if it declares none).
    pub fn opset(&self) -> i64 {
        self.proto
            .opset_import
            .iter()
            .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
            .map(|o| o.version)
            .unwrap_or(0)
    }

    /// Encodes the model to protobuf bytes (large initializers on every core).
    pub fn to_bytes(&self) -> Vec<u8> {
        super::encode::encode_model(&self.proto)
    }

    /// Pulls every external initializer into the model as raw data: the model no longer
    /// depends on files beside it, so it can be saved anywhere or handed to a backend in memory.
    pub(crate) fn inline_external_data(&mut self) -> Result<()> {
        let base = self.base_dir();
        let externals: Vec<(usize, Vec<u8>)> = self
            .graph()
            .initializer
            .iter()
            .enumerate()
            .filter(|(_, t)| is_external(t))
            .map(|(i, t)| Ok((i, read_external(&base, t)?)))
            .collect::<Result<_>>()
            .with_context(|| self.path.display().to_string())?;
        let graph = self.graph_mut();
        for (i, bytes) in externals {
            let t = &mut graph.initializer[i];
            t.raw_data = bytes;
            t.external_data.clear();
            t.data_location = None;
        }
        Ok(())
    }

    /// Writes the model to `path` atomically (temporary file, then rename).
    ///
    /// External data references are written as they are: call
    /// [`OnnxModel::inline_external_data`] first when saving into another folder.
    pub fn save(&self, path: &Path) -> Result<()> {
        write_atomic(path, &self.to_bytes())
    }
}

/// The folder of the model file at `path` (its canonical path's, where it exists, so a link
/// leads to the folder of the file it links to): where its external data lives.
pub(crate) fn model_folder(path: &Path) -> PathBuf {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    match real.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Reads a model file, turning the common mistakes into messages that name the path.
pub(crate) fn read_model_file(path: &Path) -> Result<Vec<u8>> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("{shown}: no such file"),
        Err(e) => bail!("{shown}: cannot read: {e}"),
    };
    if meta.is_dir() {
        bail!("{shown}: is a directory, expected an .onnx file");
    }
    std::fs::read(path).with_context(|| format!("{shown}: cannot read"))
}
