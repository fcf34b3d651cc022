//! Files kept under a key, so that a later run reuses them only when they answer the same
//! question: calibration caches, engines and kept search results. Beside each artifact lies its
//! key file (the artifact's name with a suffix added), which holds what the artifact depends on
//! and the SHA-256 of the bytes it vouches for. A lookup tells a reusable artifact (a hit) from
//! none (missing) and from one that must be made again (stale: each key field that changed,
//! named by its dotted path in one style, or why the pair cannot be trusted); a store writes the
//! artifact and then its key file so that no interruption leaves a pair a later run trusts.

use crate::atomic_file::{
    remove_if_present, stage_unsynced, write_atomic, write_atomic_unsynced, StagedFile,
};
use crate::digest::sha256_hex;
use anyhow::Result;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What an artifact's key file is: how it is named, read and written, and what it says.
pub trait KeyFile: Sized {
    /// What the key file's name adds to the artifact's (`.json`, `.sha256`).
    const SUFFIX: &'static str;

    /// Reads a key file's bytes.
    fn parse(bytes: &[u8]) -> Result<Self>;

    /// The key file's bytes; `artifact` is the file it vouches for.
    fn encode(&self, artifact: &Path) -> Result<Vec<u8>>;

    /// The key, as compared field by field with the one looked up ([`Value::Null`] where the
    /// whole key is in the artifact's name).
    fn key_fields(&self) -> Value;

    /// The SHA-256 of the artifact it vouches for, hex; `None` where it holds none.
    fn artifact_sha256(&self) -> Option<&str>;
}

/// The key file of the artifact at `artifact`: its path with `F::SUFFIX` appended.
pub(crate) fn key_file_path<F: KeyFile>(artifact: &Path) -> PathBuf {
    let mut name = artifact.as_os_str().to_owned();
    name.push(F::SUFFIX);
    PathBuf::from(name)
}

/// Reads the key file of the artifact at `artifact`; errors name the key file.
pub(crate) fn read_key_file<F: KeyFile>(artifact: &Path) -> Result<F> {
    let path = key_file_path::<F>(artifact);
    let bytes = std::fs::read(&path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read ({e})", path.display()))?;
    F::parse(&bytes).map_err(|e| anyhow::anyhow!("{}: {}", path.display(), one_line(&e)))
}

/// One key field whose value differs between the stored artifact and the lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldChange {
    /// Dotted path of the field (`profile.inputs.0.max`).
    pub field: String,
    /// Its value in the stored key, as shown to people.
    pub was: String,
    /// Its value now.
    pub now: String,
}

impl std::fmt::Display for FieldChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} was {}, now {}", self.field, self.was, self.now)
    }
}

/// Why an artifact found on disk is not reused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stale {
    /// Its key differs from the one looked up in these fields.
    Changed(Vec<FieldChange>),
    /// It cannot be trusted (no readable key file, bytes that are not the ones vouched for, a
    /// key file without its artifact); one line, naming the files.
    Untrusted(String),
}

impl Stale {
    /// The reasons, one line each.
    pub fn reasons(&self) -> Vec<String> {
        match self {
            Stale::Changed(changes) => changes.iter().map(ToString::to_string).collect(),
            Stale::Untrusted(why) => vec![why.clone()],
        }
    }
}

/// What a lookup found at an artifact's path; `T` is what a hit yields ([`Found`], or what
/// the caller makes of it through [`Lookup::and_then`]).
#[derive(Debug)]
pub enum Lookup<T> {
    /// A reusable artifact: its key matches and its bytes are the ones vouched for.
    Hit(T),
    /// Neither the artifact nor its key file is there.
    Missing,
    /// Something is there that must not be reused.
    Stale(Stale),
}

impl<T> Lookup<T> {
    /// A hit turned into what `f` makes of it; where `f` fails (an artifact its reader refuses),
    /// stale with that reason.
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Result<U>) -> Lookup<U> {
        match self {
            Lookup::Hit(found) => match f(found) {
                Ok(u) => Lookup::Hit(u),
                Err(e) => Lookup::Stale(Stale::Untrusted(one_line(&e))),
            },
            Lookup::Missing => Lookup::Missing,
            Lookup::Stale(s) => Lookup::Stale(s),
        }
    }
}

/// A reusable artifact as found: its key file and its bytes.
#[derive(Debug)]
pub struct Found<F> {
    /// The key file.
    pub(crate) key_file: F,
    /// The artifact's bytes.
    pub bytes: Vec<u8>,
}

/// Looks up the artifact at `artifact` for the key `now` (as [`KeyFile::key_fields`] gives it):
/// a hit only when its key file is readable, every key field matches and the artifact's bytes
/// are the ones the key file vouches for.
pub fn lookup<F: KeyFile>(artifact: &Path, now: &Value) -> Lookup<Found<F>> {
    let side = key_file_path::<F>(artifact);
    let untrusted = |why: String| Lookup::Stale(Stale::Untrusted(why));
    if !artifact.exists() && !side.exists() {
        return Lookup::Missing;
    }
    if !artifact.exists() {
        let why = format!("{} is there without {}", side.display(), artifact.display());
        return untrusted(why);
    }
    let key_file = match read_key_file::<F>(artifact) {
        Ok(k) => k,
        Err(e) => {
            return untrusted(format!(
                "{}: its key file is missing or unreadable ({})",
                artifact.display(),
                one_line(&e)
            ))
        }
    };
    let changes = diff(&key_file.key_fields(), now);
    if !changes.is_empty() {
        return Lookup::Stale(Stale::Changed(changes));
    }
    let bytes = match std::fs::read(artifact) {
        Ok(b) => b,
        Err(e) => return untrusted(format!("{}: cannot read ({e})", artifact.display())),
    };
    if let Some(why) = vouch_problem(artifact, &bytes, key_file.artifact_sha256(), &side) {
        return untrusted(why);
    }
    Lookup::Hit(Found { key_file, bytes })
}

/// Why `bytes`, the artifact at `artifact`, are not what a key file at `side` holding `sha256`
/// vouches for, if they are not.
pub(crate) fn vouch_problem(
    artifact: &Path,
    bytes: &[u8],
    sha256: Option<&str>,
    side: &Path,
) -> Option<String> {
    match sha256 {
        None => Some(format!(
            "{} holds no SHA-256 of {} (written by an older trtkit), so it cannot be checked",
            side.display(),
            artifact.display()
        )),
        Some(hash) if hash != sha256_hex(bytes) => Some(format!(
            "{} is not the file {} vouches for (another SHA-256): changed since trtkit wrote it, stale or tampered",
            artifact.display(),
            side.display()
        )),
        Some(_) => None,
    }
}

/// Whether a store flushes the artifact and its key file to disk before each rename.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Flushed: small files, cheap to sync.
    Synced,
    /// Not flushed (a large engine's fsync costs more than the build of a small one): safe
    /// because every reuse checks the artifact against the SHA-256 in its key file, and a key
    /// file a power loss leaves torn does not parse.
    Unsynced,
}

/// Writes `bytes` as the artifact at `artifact` and then the key file `make` returns for the
/// artifact's SHA-256: the old key file goes first, then the artifact lands atomically, then the
/// new key file, so an interruption leaves an artifact no key file vouches for, never a wrong
/// pair. Returns the key file as written.
pub(crate) fn store<F: KeyFile>(
    artifact: &Path,
    bytes: &[u8],
    durability: Durability,
    make: impl FnOnce(String) -> F,
) -> Result<F> {
    let side = key_file_path::<F>(artifact);
    remove_if_present(&side)?;
    let hash = match durability {
        Durability::Synced => {
            write_atomic(artifact, bytes)?;
            sha256_hex(bytes)
        }
        // Hashed on a second thread while the artifact is written.
        Durability::Unsynced => std::thread::scope(|s| {
            let hash = s.spawn(|| sha256_hex(bytes));
            let written = stage_unsynced(artifact, bytes).and_then(StagedFile::commit_replacing);
            written.map(|()| hash.join().expect("hashing does not panic"))
        })?,
    };
    let key_file = make(hash);
    let encoded = key_file.encode(artifact)?;
    match durability {
        Durability::Synced => write_atomic(&side, &encoded)?,
        Durability::Unsynced => write_atomic_unsynced(&side, &encoded)?,
    }
    Ok(key_file)
}

/// The artifacts in `folder` that `is_artifact` accepts, sorted by path, each with its key file
/// or why that cannot be read (a folder that cannot be read lists nothing).
pub fn list<F: KeyFile>(
    folder: &Path,
    is_artifact: impl Fn(&Path) -> bool,
) -> Vec<(PathBuf, Result<F>)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && is_artifact(p))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let key_file = read_key_file(&p);
            (p, key_file)
        })
        .collect()
}

/// The fields that differ between the keys `was` and `now`: objects compared key by key and
/// lists of objects item by item (their paths dotted: `profile.inputs.0.max`), anything else as
/// a whole; in `now`'s order, then fields only `was` has.
pub(crate) fn diff(was: &Value, now: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    diff_into("", was, now, &mut out);
    out
}

fn diff_into(path: &str, was: &Value, now: &Value, out: &mut Vec<FieldChange>) {
    if was == now {
        return;
    }
    let child = |name: &str| match path {
        "" => name.to_string(),
        _ => format!("{path}.{name}"),
    };
    match (was, now) {
        (Value::Object(a), Value::Object(b)) => {
            for (name, b_value) in b {
                diff_into(
                    &child(name),
                    a.get(name).unwrap_or(&Value::Null),
                    b_value,
                    out,
                );
            }
            for (name, a_value) in a.iter().filter(|(name, _)| !b.contains_key(*name)) {
                diff_into(&child(name), a_value, &Value::Null, out);
            }
        }
        (Value::Array(a), Value::Array(b))
            if a.len() == b.len() && a.iter().chain(b).any(Value::is_object) =>
        {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff_into(&child(&i.to_string()), x, y, out);
            }
        }
        _ => out.push(FieldChange {
            field: if path.is_empty() {
                "key".into()
            } else {
                path.into()
            },
            was: shown(was),
            now: shown(now),
        }),
    }
}

/// A key value as people read it: text as it is (hex digests cut to 12 digits), nothing as
/// `none`, anything else as compact JSON; cut to 60 characters.
fn shown(value: &Value) -> String {
    let text = match value {
        Value::Null => "none".to_string(),
        Value::String(s) if s.len() > 16 && s.chars().all(|c| c.is_ascii_hexdigit()) => {
            s[..12].to_string()
        }
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match text.char_indices().nth(60) {
        Some(_) => {
            let cut = text.char_indices().nth(57).map_or(0, |c| c.0);
            format!("{}…", &text[..cut])
        }
        None => text,
    }
}

/// An error's chain on one line.
fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    /// A key file holding a key and the artifact's hash.
    #[derive(Debug, Serialize, Deserialize)]
    struct Side {
        key: Value,
        sha256: Option<String>,
    }

    impl KeyFile for Side {
        const SUFFIX: &'static str = ".json";
        fn parse(bytes: &[u8]) -> Result<Self> {
            Ok(serde_json::from_slice(bytes)?)
        }
        fn encode(&self, _: &Path) -> Result<Vec<u8>> {
            Ok(serde_json::to_vec(self)?)
        }
        fn key_fields(&self) -> Value {
            self.key.clone()
        }
        fn artifact_sha256(&self) -> Option<&str> {
            self.sha256.as_deref()
        }
    }

    fn store_side(path: &Path, bytes: &[u8], key: &Value, d: Durability) -> Side {
        store(path, bytes, d, |sha| Side {
            key: key.clone(),
            sha256: Some(sha),
        })
        .unwrap()
    }

    #[test]
    fn diff_names_each_changed_field_by_its_dotted_path() {
        let was = json!({"a": 1, "p": {"inputs": [{"max": [8, 3]}]}, "h": "0123456789abcdef0123", "gone": true});
        let now = json!({"a": 1, "p": {"inputs": [{"max": [16, 3]}]}, "h": "ffff456789abcdef0123"});
        let changes: Vec<String> = diff(&was, &now).iter().map(ToString::to_string).collect();
        assert_eq!(
            changes,
            [
                "h was 0123456789ab, now ffff456789ab",
                "p.inputs.0.max was [8,3], now [16,3]",
                "gone was true, now none",
            ]
        );
        assert!(diff(&was, &was).is_empty());
        let long = json!("x".repeat(100));
        let cut = &diff(&long, &json!("y"))[0];
        assert_eq!(cut.was.chars().count(), 58, "{cut}");
    }

    #[test]
    fn lookup_tells_hit_missing_and_stale() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        let key = json!({"batch": 8});
        assert!(matches!(lookup::<Side>(&path, &key), Lookup::Missing));
        for d in [Durability::Synced, Durability::Unsynced] {
            store_side(&path, b"bytes", &key, d);
            match lookup::<Side>(&path, &key) {
                Lookup::Hit(found) => assert_eq!(found.bytes, b"bytes"),
                other => panic!("{other:?}"),
            }
        }
        let Lookup::Stale(stale) = lookup::<Side>(&path, &json!({"batch": 16})) else {
            panic!("a changed key is stale")
        };
        assert_eq!(stale.reasons(), ["batch was 8, now 16"]);

        std::fs::write(&path, b"other").unwrap();
        let Lookup::Stale(Stale::Untrusted(why)) = lookup::<Side>(&path, &key) else {
            panic!("changed bytes are stale")
        };
        assert!(
            why.contains("tampered") && why.contains("a.bin.json"),
            "{why}"
        );

        std::fs::write(key_file_path::<Side>(&path), b"{\"key\": 1").unwrap();
        let Lookup::Stale(Stale::Untrusted(why)) = lookup::<Side>(&path, &key) else {
            panic!("a torn key file is stale")
        };
        assert!(
            why.contains("missing or unreadable") && !why.contains('\n'),
            "{why}"
        );

        std::fs::remove_file(&path).unwrap();
        let Lookup::Stale(Stale::Untrusted(why)) = lookup::<Side>(&path, &key) else {
            panic!("a key file alone is stale")
        };
        assert!(why.contains("without"), "{why}");
    }

    #[test]
    fn a_key_file_without_a_hash_is_not_trusted_and_list_reads_each() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        std::fs::write(&path, b"bytes").unwrap();
        let side = Side {
            key: json!({}),
            sha256: None,
        };
        std::fs::write(key_file_path::<Side>(&path), side.encode(&path).unwrap()).unwrap();
        let Lookup::Stale(Stale::Untrusted(why)) = lookup::<Side>(&path, &json!({})) else {
            panic!("no hash, no reuse")
        };
        assert!(why.contains("holds no SHA-256"), "{why}");

        std::fs::write(dir.path().join("b.bin"), b"x").unwrap();
        let listed = list::<Side>(dir.path(), |p| p.extension().is_some_and(|e| e == "bin"));
        let names: Vec<_> = listed
            .iter()
            .map(|(p, k)| (p.file_name().unwrap(), k.is_ok()))
            .collect();
        assert_eq!(names, [("a.bin".as_ref(), true), ("b.bin".as_ref(), false)]);
    }
}
