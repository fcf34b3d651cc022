//! SHA-256, the one hash trtkit names and checks things by: models, engines, calibration caches,
//! sample sets, kept search results and the keys built from them, always as lowercase hex. Every
//! hash in a key file or a name comes from here, so two places can never hash the same thing
//! two ways.

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::path::Path;

/// The SHA-256 of `bytes`: 64 lowercase hex digits.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// The first 16 hex digits of the SHA-256 of `bytes`: the short id of a bench cell's settings,
/// a calibration cache in a tag, a kept search result.
pub fn sha256_hex16(bytes: &[u8]) -> String {
    let mut hex = sha256_hex(bytes);
    hex.truncate(16);
    hex
}

/// The SHA-256 of a file, hex: the identity of a model (or engine) in every key trtkit writes.
pub fn file_sha256(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(sha256_hex(&bytes))
}

/// A SHA-256 fed piece by piece: a set of files (each name, then its bytes) hashed as one, as a
/// calibration source identifies its samples.
#[derive(Default)]
pub struct Sha256Stream(Sha256);

impl Sha256Stream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `bytes` to the hash.
    pub fn update(&mut self, bytes: impl AsRef<[u8]>) {
        self.0.update(bytes);
    }

    /// The hash of everything fed, hex.
    pub(crate) fn finish_hex(self) -> String {
        format!("{:x}", self.0.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(sha256_hex16(b"abc"), "ba7816bf8f01cfea");
        let mut stream = Sha256Stream::new();
        stream.update(b"a");
        stream.update("bc");
        assert_eq!(stream.finish_hex(), sha256_hex(b"abc"));
    }
}
