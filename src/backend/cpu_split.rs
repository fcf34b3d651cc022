//! How a CPU host's cores are shared between the image loader and the model when both run at
//! once (`validate`, `calibrate`): the model's threads and whether ONNX Runtime's pools spin.
//!
//! ONNX Runtime's intra-op pool spins between runs by default, so a model on every core takes
//! the cores the JPEG decoder needs even while it has nothing to do. The model opens as it
//! always did (every core, ONNX Runtime's spinning) and a short first stretch of the run is
//! measured: where the consumer waited for the loader longer than it spent in the model
//! (loader-bound), the model is opened again with spinning off and only the threads it needs to
//! stay ahead, twice over; otherwise (model-bound) nothing changes: spinning off cost a
//! model-bound ResNet-50 a fifth of its rate on 2 cores. `--threads N` overrides the count and
//! nothing is chosen.

use super::select::BackendOptions;
use super::Device;
use serde::{Deserialize, Serialize};

/// Batches measured for the choice, after the first (which pays the backend's lazy set-up
/// and the loader's start).
pub(crate) const PILOT_BATCHES: usize = 3;

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

/// `options` as the model opens when a loader decodes beside it on the CPU (`beside`): on the
/// user's threads or every core (named, so that the report can say how many). Unchanged
/// otherwise.
pub(crate) fn beside_loader(options: &BackendOptions, beside: bool) -> BackendOptions {
    let mut options = options.clone();
    if beside && options.device == Device::Cpu {
        options.threads = Some(options.threads.unwrap_or_else(cores));
    }
    options
}

/// What the first stretch chose: the model's threads, whether ONNX Runtime's pools spin, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The model's threads.
    pub threads: usize,
    /// Whether ONNX Runtime's pools spin between runs.
    pub spinning: bool,
    /// Why, in words.
    pub why: String,
}

/// The split a run reports, said on an info line: `given` is the user's `--threads`, `first`
/// the threads the model opened on, `chosen` what the first stretch chose (`None`: the user
/// chose, or the run was too short to measure); `ort`: the backend is ONNX Runtime (tract's
/// pools never spin).
pub fn reported(given: Option<usize>, first: usize, chosen: Option<Choice>, ort: bool) -> CpuSplit {
    let (model_threads, spinning, chosen_by, why) = match (given, chosen) {
        (Some(n), _) => (
            n,
            true,
            ChosenBy::User,
            format!("--threads {n} given: nothing chosen"),
        ),
        (None, Some(c)) => (c.threads, c.spinning, ChosenBy::Trtkit, c.why),
        (None, None) => (
            first,
            true,
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
        spinning: ort && spinning,
        chosen_by,
        why,
    };
    tracing::info!(
        "CPU split: model on {} threads, loader on {}, spinning {}: {}",
        split.model_threads,
        split.loader_threads,
        if split.spinning { "on" } else { "off" },
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

/// The model's threads and spinning for the rest of a run whose first stretch measured
/// `stretch` with the model on `threads` threads. Model-bound (the consumer spent at least as
/// long in the model as waiting for images): nothing changes. Loader-bound: spinning off, and
/// the model, busy a share `u` of the time on `threads` threads, needs about `u × threads` of
/// them to keep pace; it keeps twice that, rounded up, at least one.
pub(crate) fn model_threads_for(stretch: &Stretch, threads: usize) -> Choice {
    let threads = threads.max(1);
    let total = stretch.model_s + stretch.wait_s;
    let keep = |spinning, why| Choice {
        threads,
        spinning,
        why,
    };
    if stretch.batches == 0 || total <= 0.0 {
        return keep(true, "nothing measured: the model keeps every core".into());
    }
    let busy = stretch.model_s / total;
    let measured = format!(
        "over {} batches the model took {:.1} ms a batch and waited {:.1} ms for images",
        stretch.batches,
        1e3 * stretch.model_s / stretch.batches as f64,
        1e3 * stretch.wait_s / stretch.batches as f64
    );
    if stretch.model_s >= stretch.wait_s {
        return keep(
            true,
            format!("model-bound ({measured}): the model keeps its {threads} threads"),
        );
    }
    let fewer = ((busy * threads as f64 * HEADROOM).ceil() as usize).clamp(1, threads);
    let why = if fewer < threads {
        format!("loader-bound ({measured}): {fewer} of {threads} threads keep the model ahead of the loader, the rest decode; spinning off")
    } else {
        format!("loader-bound ({measured}), but not by enough to spare a thread; spinning off")
    };
    Choice {
        threads: fewer,
        spinning: false,
        why,
    }
}

/// [`model_threads_for`] where `left` batches remain to run: a change only where enough batches
/// are left to repay opening the model again (twice the first stretch).
pub fn choose(stretch: &Stretch, threads: usize, left: usize) -> Choice {
    let choice = model_threads_for(stretch, threads);
    if !choice.spinning && left < 2 * (PILOT_BATCHES + 1) {
        let why = format!(
            "{}; but with only {left} batches left the model kept its {threads} threads, spinning",
            choice.why
        );
        return Choice {
            threads,
            spinning: true,
            why,
        };
    }
    choice
}

/// Whether `choice` differs from a model opened on `threads` threads with ONNX Runtime's
/// default spinning: the model must then be opened again.
pub fn changes(choice: &Choice, threads: usize) -> bool {
    choice.threads != threads || !choice.spinning
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
        let c = model_threads_for(&stretch(2.0, 37.0), 2);
        assert_eq!((c.threads, c.spinning), (1, false), "{}", c.why);
        assert!(c.why.starts_with("loader-bound"), "{}", c.why);
        assert!(changes(&c, 2));
        // On 16 cores, a model busy 20% of the time keeps 2 × 0.2 × 16 = 6.4 → 7 threads.
        assert_eq!(model_threads_for(&stretch(20.0, 80.0), 16).threads, 7);
        // Busy 40% on 2 cores: 1.6 threads, twice over, is more than there are: keep both.
        let c = model_threads_for(&stretch(40.0, 60.0), 2);
        assert_eq!((c.threads, c.spinning), (2, false));
    }

    #[test]
    fn a_model_bound_run_keeps_every_thread() {
        let c = model_threads_for(&stretch(640.0, 1.0), 2);
        assert_eq!((c.threads, c.spinning), (2, true));
        assert!(c.why.starts_with("model-bound"), "{}", c.why);
        assert!(!changes(&c, 2), "a model-bound run is not opened again");
        assert_eq!(model_threads_for(&stretch(50.0, 50.0), 16).threads, 16);
        assert!(model_threads_for(&stretch(50.0, 50.0), 16).spinning);
        assert_eq!(model_threads_for(&Stretch::default(), 4).threads, 4);
    }

    #[test]
    fn a_change_only_where_enough_batches_are_left() {
        let loader_bound = stretch(2.0, 37.0);
        assert_eq!(choose(&loader_bound, 2, 2 * (PILOT_BATCHES + 1)).threads, 1);
        let c = choose(&loader_bound, 2, 3);
        assert_eq!((c.threads, c.spinning), (2, true));
        assert!(c.why.contains("only 3 batches left"), "{}", c.why);
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
