//! The ONNX file a build reads: mapped into memory rather than copied, and hashed on another
//! thread while other work runs (decoding, or TensorRT's build when the hash is needed only
//! then), so that neither the 100 MB read nor the SHA-256 of a ResNet-50 stands between the
//! command and TensorRT's build.
//!
//! The same bytes go to TensorRT's parser when the build does not change the model (an FP32
//! build at the model's own shapes): they are never copied.

use super::sys::map_read_only;
use crate::digest::sha256_hex;
use crate::onnx::model::read_model_file;
use anyhow::{Context, Result};
use memmap2::Mmap;
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

/// The bytes of a model file: mapped, or read (an empty file cannot be mapped).
enum FileBytes {
    Mapped(Mmap),
    Read(Vec<u8>),
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
            FileBytes::Read(v) => v,
        }
    }
}

/// A model file opened for a build: its bytes, and its SHA-256 (computed on another thread
/// once started).
pub(crate) struct ModelFile {
    bytes: Arc<FileBytes>,
    hashing: Option<JoinHandle<String>>,
    sha256: OnceLock<String>,
}

impl ModelFile {
    /// Maps the file at `path` and, with `hash_now`, starts hashing it (else
    /// [`ModelFile::start_hashing`] or [`ModelFile::sha256`] does). Errors name the file
    /// (missing, a folder, unreadable).
    pub fn open(path: &Path, hash_now: bool) -> Result<Self> {
        let mut file = Self::map(path)?;
        if hash_now {
            file.start_hashing();
        }
        Ok(file)
    }

    fn map(path: &Path) -> Result<Self> {
        let shown = path.display();
        let file = match std::fs::File::open(path) {
            Ok(f)
                if f.metadata()
                    .map(|m| m.is_file() && m.len() > 0)
                    .unwrap_or(false) =>
            {
                f
            }
            // Missing, a folder, empty or odd: the plain read gives each its own message.
            _ => return Ok(Self::of(FileBytes::Read(read_model_file(path)?))),
        };
        let map = map_read_only(&file).with_context(|| format!("{shown}: cannot read"))?;
        Ok(Self::of(FileBytes::Mapped(map)))
    }

    fn of(bytes: FileBytes) -> Self {
        ModelFile {
            bytes: Arc::new(bytes),
            hashing: None,
            sha256: OnceLock::new(),
        }
    }

    /// Starts hashing the file on another thread, unless that has begun or ended already.
    pub(crate) fn start_hashing(&mut self) {
        if self.hashing.is_none() && self.sha256.get().is_none() {
            let shared = Arc::clone(&self.bytes);
            self.hashing = Some(std::thread::spawn(move || sha256_hex(&shared)));
        }
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The file's SHA-256, hex (waits for the hashing thread the first time, starting it if
    /// need be).
    pub(crate) fn sha256(&mut self) -> &str {
        self.start_hashing();
        if let Some(h) = self.hashing.take() {
            let hash = h.join().expect("hashing does not panic");
            let _ = self.sha256.set(hash);
        }
        self.sha256
            .get()
            .expect("the hash is set once hashing ends")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_bytes_and_hash_are_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.onnx");
        let content: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        for hash_now in [true, false] {
            let mut file = ModelFile::open(&path, hash_now).unwrap();
            assert_eq!(file.bytes(), &content[..]);
            assert_eq!(file.hashing.is_some(), hash_now);
            file.start_hashing();
            assert!(file.hashing.is_some());
            assert_eq!(file.sha256(), sha256_hex(&content));
            file.start_hashing(); // done already: nothing starts again
            assert!(file.hashing.is_none());
            assert_eq!(file.sha256(), sha256_hex(&content));
        }
        // Never started: asking for the hash takes it.
        assert_eq!(
            ModelFile::open(&path, false).unwrap().sha256(),
            sha256_hex(&content)
        );
    }

    #[test]
    fn an_empty_file_is_read_not_mapped_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.onnx");
        std::fs::write(&path, b"").unwrap();
        let mut file = ModelFile::open(&path, true).unwrap();
        assert!(file.bytes().is_empty());
        assert_eq!(file.sha256(), sha256_hex(b""));
        let missing = dir.path().join("nope.onnx");
        let e = ModelFile::open(&missing, true).err().unwrap().to_string();
        assert!(e.contains("nope.onnx") && e.contains("no such file"), "{e}");
        let e = ModelFile::open(dir.path(), true).err().unwrap().to_string();
        assert!(e.contains("is a directory"), "{e}");
    }
}
