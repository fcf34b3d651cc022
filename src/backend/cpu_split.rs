//! How a CPU host's cores are shared between the image loader and the model when both run at
//! once (`validate`, `calibrate`): the model's threads and whether ONNX Runtime's pools spin.
//!
//! ONNX Runtime's intra-op pool spins between runs by default, so a model on every core takes
//! the cores the JPEG decoder needs even while it has nothing to do. Whenever a loader runs
//! beside the model, spinning is off. The thread count comes from a short first stretch of the
//! run, measured on every core: where the consumer waited for the loader longer than it spent
//! in the model (loader-bound), the model keeps only the threads it needs to stay ahead, twice
//! over; otherwise (model-bound) it keeps every core. `--threads N` overrides the count.

use super::select::BackendOptions;
use super::Device;
use serde::{Deserialize, Serialize};

/// Batches measured for the choice, after the first (which pays the backend's lazy set-up
/// and the loader's start).
pub const PILOT_BATCHES: usize = 3;

/// How much faster than the loader the model must stay with the threads it keeps.
const HEADROOM: f64 = 2.0;

/// Who chose the model's thread count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChosenBy {
    /// trtkit, by the rule in this module.
    #[default]
    Trtkit,
    /// The user, with `--threads`.
    User,
}

/// How the cores were shared between the loader and the model, as a report says it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSplit {
    /// Threads the model ran on (ONNX Runtime's intra-op pool, tract's workers).
    pub model_threads: usize,
    /// Threads the image loader decodes on (rayon's pool; 0 where no loader runs beside the
    /// model).
    pub loader_threads: usize,
    /// Whether ONNX Runtime's thread pools spin between runs (tract's never do).
    pub spinning: bool,
    /// Who chose the model's threads.
    pub chosen_by: ChosenBy,
    /// Why, in words.
    pub why: String,
}

/// The cores of this host as trtkit counts them (the default of `--threads`).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `options` as the model opens when a loader decodes beside it on the CPU (`beside`):
/// spinning off, on the user's threads or every core. Unchanged otherwise.
pub fn beside_loader(options: &BackendOptions, beside: bool) -> BackendOptions {
    let mut options = options.clone();
    if beside && options.device == Device::Cpu {
        options.spinning = Some(false);
        options.threads = Some(options.threads.unwrap_or_else(cores));
    }
    options
}

/// The split a run reports, said on an info line: `given` is the user's `--threads`, `first`
/// the threads the model opened on, `chosen` the threads the first stretch chose and why
/// (`None`: the user chose, or the run was too short to measure).
pub fn reported(given: Option<usize>, first: usize, chosen: Option<(usize, String)>) -> CpuSplit {
    let (model_threads, chosen_by, why) = match (given, chosen) {
        (Some(n), _) => (
            n,
            ChosenBy::User,
            format!("--threads {n} given; spinning off beside the loader"),
        ),
        (None, Some((n, why))) => (n, ChosenBy::Trtkit, why),
        (None, None) => (
            first,
            ChosenBy::Trtkit,
            format!(
                "too few batches to measure (the first {} are): the model kept its {first} threads",
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

/// What the first stretch of a run measured: the consumer's seconds inside the model and its
/// seconds waiting for the loader, over the same batches.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stretch {
    /// Batches measured.
    pub batches: usize,
    /// Seconds inside the model.
    pub model_s: f64,
    /// Seconds waiting for the loader to hand over a batch.
    pub wait_s: f64,
}

/// The model's threads for the rest of a run whose first stretch measured `stretch` with the
/// model on `threads` threads, and why. Model-bound (the consumer spent at least as long in the
/// model as waiting for images): every thread stays. Loader-bound: the model, busy a share `u`
/// of the time on `threads` threads, needs about `u × threads` of them to keep pace; it keeps
/// twice that, rounded up, at least one.
pub fn model_threads_for(stretch: &Stretch, threads: usize) -> (usize, String) {
    let threads = threads.max(1);
    let total = stretch.model_s + stretch.wait_s;
    if stretch.batches == 0 || total <= 0.0 {
        return (
            threads,
            "nothing measured: the model keeps every core".into(),
        );
    }
    let busy = stretch.model_s / total;
    let measured = format!(
        "over {} batches the model took {:.1} ms a batch and waited {:.1} ms for images",
        stretch.batches,
        1e3 * stretch.model_s / stretch.batches as f64,
        1e3 * stretch.wait_s / stretch.batches as f64
    );
    if stretch.model_s >= stretch.wait_s {
        return (
            threads,
            format!("model-bound ({measured}): the model keeps its {threads} threads"),
        );
    }
    let keep = ((busy * threads as f64 * HEADROOM).ceil() as usize).clamp(1, threads);
    let why = if keep < threads {
        format!("loader-bound ({measured}): {keep} of {threads} threads keep the model ahead of the loader, the rest decode")
    } else {
        format!("loader-bound, but not by enough to spare a thread ({measured})")
    };
    (keep, why)
}

/// [`model_threads_for`] where `left` batches remain to run: fewer threads only where enough
/// batches are left to repay opening the model again (twice the first stretch).
pub fn choose(stretch: &Stretch, threads: usize, left: usize) -> (usize, String) {
    let (keep, why) = model_threads_for(stretch, threads);
    if keep < threads && left < 2 * (PILOT_BATCHES + 1) {
        let why = format!(
            "{why}; but with only {left} batches left the model kept its {threads} threads"
        );
        return (threads, why);
    }
    (keep, why)
}

/// Adds up the first stretch of a run batch by batch: batch 0 is left out, the next
/// [`PILOT_BATCHES`] are measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pilot {
    seen: usize,
    stretch: Stretch,
}

impl Pilot {
    /// Counts one batch that spent `model_s` in the model after waiting `wait_s` for its images;
    /// returns the stretch once it is complete (exactly once).
    pub fn batch(&mut self, model_s: f64, wait_s: f64) -> Option<Stretch> {
        self.seen += 1;
        if self.seen == 1 || self.seen > PILOT_BATCHES + 1 {
            return None;
        }
        self.stretch.batches += 1;
        self.stretch.model_s += model_s;
        self.stretch.wait_s += wait_s;
        (self.seen == PILOT_BATCHES + 1).then_some(self.stretch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stretch(model_ms: f64, wait_ms: f64) -> Stretch {
        Stretch {
            batches: 3,
            model_s: 3.0 * model_ms / 1e3,
            wait_s: 3.0 * wait_ms / 1e3,
        }
    }

    #[test]
    fn a_loader_bound_run_leaves_the_loader_all_but_what_the_model_needs() {
        // The trivial model: 2 ms in the model, 37 ms waiting for the JPEGs of a batch.
        let (keep, why) = model_threads_for(&stretch(2.0, 37.0), 2);
        assert_eq!(keep, 1, "{why}");
        assert!(why.starts_with("loader-bound"), "{why}");
        // On 16 cores, a model busy 20% of the time keeps 2 × 0.2 × 16 = 6.4 → 7 threads.
        assert_eq!(model_threads_for(&stretch(20.0, 80.0), 16).0, 7);
        // Busy 40% on 2 cores: 1.6 threads, twice over, is more than there are: keep both.
        assert_eq!(model_threads_for(&stretch(40.0, 60.0), 2).0, 2);
    }

    #[test]
    fn a_model_bound_run_keeps_every_thread() {
        let (keep, why) = model_threads_for(&stretch(640.0, 1.0), 2);
        assert_eq!(keep, 2);
        assert!(why.starts_with("model-bound"), "{why}");
        assert_eq!(model_threads_for(&stretch(50.0, 50.0), 16).0, 16);
        assert_eq!(model_threads_for(&Stretch::default(), 4).0, 4);
    }

    #[test]
    fn fewer_threads_only_where_enough_batches_are_left() {
        let loader_bound = stretch(2.0, 37.0);
        assert_eq!(choose(&loader_bound, 2, 2 * (PILOT_BATCHES + 1)).0, 1);
        let (keep, why) = choose(&loader_bound, 2, 3);
        assert_eq!(keep, 2);
        assert!(why.contains("only 3 batches left"), "{why}");
    }

    #[test]
    fn the_pilot_leaves_out_the_first_batch_and_reports_once() {
        let mut pilot = Pilot::default();
        assert_eq!(pilot.batch(9.0, 9.0), None, "batch 0 pays the set-up");
        for _ in 1..PILOT_BATCHES {
            assert_eq!(pilot.batch(1.0, 2.0), None);
        }
        let done = pilot.batch(1.0, 2.0).expect("the stretch is complete");
        assert_eq!(done.batches, PILOT_BATCHES);
        assert_eq!(done.model_s, PILOT_BATCHES as f64);
        assert_eq!(done.wait_s, 2.0 * PILOT_BATCHES as f64);
        assert_eq!(pilot.batch(1.0, 2.0), None, "reported once");
    }
}
