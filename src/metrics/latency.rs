//! Latency statistics and the arithmetic of per-iteration timing spans.
//!
//! Every number here names the span it covers. For one iteration on a GPU stream, four
//! events are recorded: before the host→device copies (`t0`), after them (`t1`), after the
//! inference (`t2`) and after the device→host copies (`t3`). Then `h2d = t1 - t0`,
//! `compute = t2 - t1` (latency-model), `d2h = t3 - t2` and `all = t3 - t0` (latency-all).

use serde::{Deserialize, Serialize};

/// Summary statistics of a set of samples, in the samples' unit (milliseconds in trtkit).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of samples.
    pub count: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Population standard deviation.
    pub(crate) stddev: f64,
    /// Median (nearest-rank).
    pub p50: f64,
    /// 90th percentile (nearest-rank).
    pub(crate) p90: f64,
    /// 95th percentile (nearest-rank).
    pub(crate) p95: f64,
    /// 99th percentile (nearest-rank).
    pub p99: f64,
}

/// Nearest-rank percentile of already sorted samples: the smallest sample such that at least
/// `p` percent of the samples are less than or equal to it. `None` for no samples.
pub(crate) fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

impl Stats {
    /// Statistics of `samples`; `None` when there are none or one is not finite.
    pub fn from_samples(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let var = sorted.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / n;
        let pct = |p| percentile_sorted(&sorted, p).expect("non-empty");
        Some(Stats {
            count: sorted.len(),
            mean,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            stddev: var.sqrt(),
            p50: pct(50.0),
            p90: pct(90.0),
            p95: pct(95.0),
            p99: pct(99.0),
        })
    }
}

/// Mean and max of per-batch times, in milliseconds (what `validate` reports per batch).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchLatency {
    /// Batches measured.
    pub batches: usize,
    /// Mean, ms.
    pub mean_ms: f64,
    /// Max, ms.
    pub(crate) max_ms: f64,
}

impl BatchLatency {
    /// Mean and max of `samples` (milliseconds); all zero when there are none.
    pub(crate) fn of_ms(samples: &[f64]) -> BatchLatency {
        Stats::from_samples(samples)
            .map(|s| BatchLatency {
                batches: s.count,
                mean_ms: s.mean,
                max_ms: s.max,
            })
            .unwrap_or_default()
    }
}

/// The four event times of one iteration, in milliseconds from a common origin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct EventTimes {
    /// Before the host→device copies.
    pub t0: f64,
    /// After the host→device copies, before the inference.
    pub t1: f64,
    /// After the inference, before the device→host copies.
    pub t2: f64,
    /// After the device→host copies.
    pub t3: f64,
}

/// The spans of one iteration, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterationSpans {
    /// Index of the stream that ran it.
    pub stream: usize,
    /// Host→device copies (0 with `--no-transfers`; `None` on a CPU backend).
    pub h2d_ms: Option<f64>,
    /// The inference alone: latency-model (`None` on a CPU backend).
    pub compute_ms: Option<f64>,
    /// Device→host copies (0 with `--no-transfers`; `None` on a CPU backend).
    pub d2h_ms: Option<f64>,
    /// First copy in to last copy out on the GPU clock, or wall clock on a CPU backend:
    /// latency-all.
    pub all_ms: f64,
    /// Host time spent enqueueing the iteration (copies, inference, events), or the whole
    /// call on a CPU backend.
    pub host_ms: f64,
}

impl IterationSpans {
    /// Spans from the event times of one GPU iteration. Errors when the times go backwards,
    /// which would mean the events were recorded out of order.
    pub(crate) fn from_events(stream: usize, e: EventTimes, host_ms: f64) -> Result<Self, String> {
        let (h2d, compute, d2h) = (e.t1 - e.t0, e.t2 - e.t1, e.t3 - e.t2);
        if h2d < 0.0 || compute < 0.0 || d2h < 0.0 {
            return Err(format!(
                "event times out of order: {:.6} {:.6} {:.6} {:.6} ms",
                e.t0, e.t1, e.t2, e.t3
            ));
        }
        Ok(IterationSpans {
            stream,
            h2d_ms: Some(h2d),
            compute_ms: Some(compute),
            d2h_ms: Some(d2h),
            all_ms: e.t3 - e.t0,
            host_ms,
        })
    }

    /// Spans of one CPU iteration: only latency-all (wall clock) is known.
    pub(crate) fn wall_only(wall_ms: f64) -> Self {
        IterationSpans {
            stream: 0,
            h2d_ms: None,
            compute_ms: None,
            d2h_ms: None,
            all_ms: wall_ms,
            host_ms: wall_ms,
        }
    }
}

/// Statistics of every span over a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpanStats {
    /// latency-all.
    pub all: Stats,
    /// latency-model (GPU backends only).
    pub compute: Option<Stats>,
    /// Host→device copies (GPU backends only).
    pub(crate) h2d: Option<Stats>,
    /// Device→host copies (GPU backends only).
    pub(crate) d2h: Option<Stats>,
    /// Host enqueue time.
    pub host: Stats,
}

impl SpanStats {
    /// Statistics of each span over `iters`; `None` when there are no iterations.
    pub(crate) fn from_iterations(iters: &[IterationSpans]) -> Option<SpanStats> {
        let col = |f: &dyn Fn(&IterationSpans) -> Option<f64>| -> Option<Stats> {
            let v: Option<Vec<f64>> = iters.iter().map(f).collect();
            Stats::from_samples(&v?)
        };
        Some(SpanStats {
            all: col(&|i| Some(i.all_ms))?,
            compute: col(&|i| i.compute_ms),
            h2d: col(&|i| i.h2d_ms),
            d2h: col(&|i| i.d2h_ms),
            host: col(&|i| Some(i.host_ms))?,
        })
    }
}

/// Samples per second: `samples` processed in `seconds` of wall time; 0 for no time.
pub fn throughput(samples: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        samples as f64 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn statistics_of_one_to_ten() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = Stats::from_samples(&v).unwrap();
        assert_eq!(s.count, 10);
        assert_eq!(s.mean, 5.5);
        assert_eq!((s.min, s.max), (1.0, 10.0));
        assert!((s.stddev - 8.25f64.sqrt()).abs() < 1e-12);
        assert_eq!((s.p50, s.p90, s.p95, s.p99), (5.0, 9.0, 10.0, 10.0));
    }

    #[test]
    fn percentiles_of_a_hundred_and_edge_cases() {
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let s = Stats::from_samples(&v).unwrap();
        assert_eq!((s.p50, s.p90, s.p95, s.p99), (50.0, 90.0, 95.0, 99.0));
        assert_eq!(Stats::from_samples(&[]), None);
        assert_eq!(Stats::from_samples(&[1.0, f64::NAN]), None);
        let one = Stats::from_samples(&[3.5]).unwrap();
        assert_eq!((one.p50, one.p99, one.stddev), (3.5, 3.5, 0.0));
        assert_eq!(percentile_sorted(&[1.0, 2.0], 0.0), Some(1.0));
    }

    #[test]
    fn spans_from_events() {
        let e = EventTimes {
            t0: 10.0,
            t1: 10.5,
            t2: 12.0,
            t3: 12.25,
        };
        let s = IterationSpans::from_events(1, e, 0.01).unwrap();
        assert_eq!(s.h2d_ms, Some(0.5));
        assert_eq!(s.compute_ms, Some(1.5));
        assert_eq!(s.d2h_ms, Some(0.25));
        assert_eq!(s.all_ms, 2.25);
        let bad = EventTimes { t2: 10.2, ..e };
        assert!(IterationSpans::from_events(0, bad, 0.0).is_err());
    }

    #[test]
    fn span_stats_leave_gpu_columns_empty_for_cpu_runs() {
        let iters = [
            IterationSpans::wall_only(2.0),
            IterationSpans::wall_only(4.0),
        ];
        let s = SpanStats::from_iterations(&iters).unwrap();
        assert_eq!(s.all.mean, 3.0);
        assert!(s.compute.is_none() && s.h2d.is_none());
        assert!(SpanStats::from_iterations(&[]).is_none());
        assert_eq!(throughput(64, 0.5), 128.0);
        assert_eq!(throughput(64, 0.0), 0.0);
    }

    proptest! {
        #[test]
        fn ordered_statistics(v in proptest::collection::vec(0.0f64..1e6, 1..200)) {
            let s = Stats::from_samples(&v).unwrap();
            prop_assert!(s.min <= s.p50 && s.p50 <= s.p90 && s.p90 <= s.p95);
            prop_assert!(s.p95 <= s.p99 && s.p99 <= s.max);
            prop_assert!(s.min <= s.mean + 1e-6 && s.mean <= s.max + 1e-6);
            prop_assert!(s.stddev >= 0.0 && s.stddev <= (s.max - s.min) + 1e-6);
        }

        #[test]
        fn latency_all_covers_every_span(a in 0.0f64..10.0, b in 0.0f64..10.0, c in 0.0f64..10.0) {
            let e = EventTimes { t0: 1.0, t1: 1.0 + a, t2: 1.0 + a + b, t3: 1.0 + a + b + c };
            let s = IterationSpans::from_events(0, e, 0.0).unwrap();
            prop_assert!(s.all_ms + 1e-9 >= s.compute_ms.unwrap());
            prop_assert!((s.h2d_ms.unwrap() + s.compute_ms.unwrap() + s.d2h_ms.unwrap() - s.all_ms).abs() < 1e-9);
        }
    }
}
