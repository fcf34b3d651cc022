//! Which cost model tract ranks its x86-64 matrix kernels with. For every matrix product tract
//! picks the kernel (tile shape, AVX-512 or AVX2) that a linear cost model predicts fastest; it
//! has one model measured on Intel parts and one measured on AMD parts, chosen from CPUID unless
//! `TRACT_X86_KIND` says otherwise. On an Intel Xeon (the host CPU of an H100 machine) the AMD
//! model's picks ran ResNet-50 in 157 ms instead of 222 ms and MobileNetV3-Large in 28 ms
//! instead of 39 ms on one thread, measured with `examples/tract_profile.rs` (README, `doctor`),
//! so trtkit asks for it unless the user has set the variable.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// The environment variable tract reads its x86-64 cost model from (`intel`, `amd`, `other`).
pub(crate) const VARIABLE: &str = "TRACT_X86_KIND";

/// The model trtkit asks for when the user has not set [`VARIABLE`].
pub(crate) const DEFAULT_MODEL: &str = "amd";

/// The cost model in use and who chose it (what `doctor` reports).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelModel {
    /// `intel`, `amd` or `other` (tract's names), or `cpuid` when tract reads the vendor itself.
    pub model: String,
    /// `TRACT_X86_KIND` (the user's setting), `trtkit` (its default) or `CPUID`.
    pub source: String,
}

static CHOSEN: OnceLock<Option<KernelModel>> = OnceLock::new();

/// Sets tract's cost model to [`DEFAULT_MODEL`] unless [`VARIABLE`] is already set. Call it
/// first thing in `main`, before any thread starts (it writes the process environment).
pub fn choose() {
    CHOSEN.get_or_init(|| {
        decide(std::env::var(VARIABLE).ok(), |model| {
            std::env::set_var(VARIABLE, model)
        })
    });
}

/// The cost model this process uses: as [`choose`] left it, or, when it was not called, what
/// the environment says.
pub fn in_use() -> Option<KernelModel> {
    CHOSEN.get().cloned().unwrap_or_else(|| {
        cfg!(target_arch = "x86_64").then(|| match std::env::var(VARIABLE) {
            Ok(model) => KernelModel {
                model,
                source: VARIABLE.into(),
            },
            Err(_) => KernelModel {
                model: "cpuid".into(),
                source: "CPUID".into(),
            },
        })
    })
}

/// The choice for a process whose environment holds `current`; `set` writes the default.
/// Nothing to choose off x86-64.
fn decide(current: Option<String>, set: impl FnOnce(&str)) -> Option<KernelModel> {
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    Some(match current {
        Some(model) => KernelModel {
            model,
            source: VARIABLE.into(),
        },
        None => {
            set(DEFAULT_MODEL);
            KernelModel {
                model: DEFAULT_MODEL.into(),
                source: "trtkit".into(),
            }
        }
    })
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn the_users_setting_stays_and_the_default_is_written_only_without_one() {
        let mut written = None;
        let users = decide(Some("intel".into()), |m| written = Some(m.to_string()));
        assert_eq!(
            users.map(|k| (k.model, k.source)),
            Some(("intel".into(), VARIABLE.into()))
        );
        assert_eq!(written, None);
        let ours = decide(None, |m| written = Some(m.to_string()));
        assert_eq!(
            ours.map(|k| (k.model, k.source)),
            Some(("amd".into(), "trtkit".into()))
        );
        assert_eq!(written.as_deref(), Some(DEFAULT_MODEL));
    }
}
