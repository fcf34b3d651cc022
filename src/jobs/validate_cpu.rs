//! `validate` on a CPU host, where the image loader and the model share the cores: the options
//! the model opens with (ONNX Runtime's spinning off, every core unless `--threads` says), the
//! choice after the first stretch and how the report says it (see [`crate::backend::cpu_split`]).

use crate::backend::cpu_split::{cores, ChosenBy, CpuSplit, PILOT_BATCHES};
use crate::backend::Device;
use crate::jobs::validate::ValidateConfig;
use crate::jobs::validate_feed::Chosen;

/// Whether the model of `config` runs on the CPU beside the loader: the device is the CPU and
/// the backend opened has no GPU side (an engine runs on its GPU whatever `--device` says).
pub(crate) fn shares_cores(config: &ValidateConfig, has_gpu_side: bool) -> bool {
    config.backend.device == Device::Cpu && !has_gpu_side
}

/// `config` as the model opens on a CPU host: spinning off (a loader runs beside it), on the
/// user's `--threads` or every core. Unchanged on a GPU.
pub(crate) fn on_cpu_host(config: &ValidateConfig) -> ValidateConfig {
    let mut config = config.clone();
    if config.backend.device == Device::Cpu {
        config.backend.spinning = Some(false);
        config.backend.threads = Some(config.backend.threads.unwrap_or_else(cores));
    }
    config
}

/// `config` with the model on `threads` threads.
pub(crate) fn with_threads(config: &ValidateConfig, threads: usize) -> ValidateConfig {
    let mut config = config.clone();
    config.backend.threads = Some(threads);
    config
}

/// The split a run reports: `given` is the user's `--threads`, `first` the threads the model
/// opened on, `chosen` what the first stretch chose (`None`: the run was too short, or the user
/// chose), `batches` the batches run.
pub(crate) fn reported(
    given: Option<usize>,
    first: usize,
    chosen: Option<&Chosen>,
    batches: usize,
) -> CpuSplit {
    let (model_threads, chosen_by, why) = match (given, chosen) {
        (Some(n), _) => (
            n,
            ChosenBy::User,
            format!("--threads {n} given; spinning off beside the loader"),
        ),
        (None, Some(c)) => (c.threads, ChosenBy::Trtkit, c.why.clone()),
        (None, None) => (
            first,
            ChosenBy::Trtkit,
            format!(
                "{batches} batches are too few to measure (the first {} are): the model kept its {first} threads",
                PILOT_BATCHES + 1
            ),
        ),
    };
    let split = CpuSplit {
        model_threads,
        loader_threads: rayon::current_num_threads(),
        spinning: false,
        chosen_by,
        why,
    };
    tracing::info!(
        "CPU split: model on {} threads, loader on {}, spinning off: {}",
        split.model_threads,
        split.loader_threads,
        split.why
    );
    split
}
