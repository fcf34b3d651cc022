//! Where an ONNX Runtime session's time goes, per operator type (`run --op-profile`): each
//! session writes ONNX Runtime's own profile (a Chrome trace) into a folder trtkit owns, and the
//! node events of every run after the session's first (which pays cuDNN's search and the arena's
//! growth) are summed per op type.
//!
//! ONNX Runtime times each node on the host. On the CPU that is the node's work; on the CUDA
//! provider it is the launch of its kernels, which return before they ran, unless CUDA runs every
//! launch to completion (`CUDA_LAUNCH_BLOCKING=1`): the report says which it was.

use anyhow::{anyhow, Context, Result};
use ort::session::builder::SessionBuilder;
use ort::session::Session;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The folder the sessions of one backend write their profiles to (removed when the last
/// holder drops it).
#[derive(Clone, Debug)]
pub(crate) struct ProfileFolder(Arc<tempfile::TempDir>);

impl ProfileFolder {
    /// A new, empty folder.
    pub fn new() -> Result<ProfileFolder> {
        let dir = tempfile::tempdir().context("cannot make a folder for ONNX Runtime's profile")?;
        Ok(ProfileFolder(Arc::new(dir)))
    }

    /// `builder` with ONNX Runtime's profiler on, writing under a name no other session of
    /// the process takes (ONNX Runtime stamps its files to the second only).
    pub fn profile(&self, builder: SessionBuilder) -> Result<SessionBuilder> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let prefix = self
            .0
            .path()
            .join(format!("session{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        builder.with_profiling(prefix).map_err(|e| anyhow!("{e}"))
    }
}

/// Microseconds per op type over the runs profiled.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct OpTimes {
    /// `Conv` → microseconds, summed over the runs.
    per_op: BTreeMap<String, f64>,
    /// Runs counted (each session's first left out).
    runs: usize,
}

/// Op types a note names before it sums the rest.
const NAMED: usize = 8;

impl OpTimes {
    /// Reads an ONNX Runtime profile (a JSON array of trace events): `Session` events named
    /// `model_run` are the runs, `Node` events named `…_kernel_time` with `args.op_name` the
    /// nodes. Nodes that began before the end of the first run are left out with it.
    pub(crate) fn from_profile(text: &str) -> Result<OpTimes> {
        let events: Vec<serde_json::Value> =
            serde_json::from_str(text).context("an ONNX Runtime profile is a JSON array")?;
        let span = |e: &serde_json::Value| Some((e["ts"].as_f64()?, e["dur"].as_f64()?));
        let mut runs: Vec<(f64, f64)> = events
            .iter()
            .filter(|e| e["cat"] == "Session" && e["name"] == "model_run")
            .filter_map(span)
            .collect();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let Some(&(first_ts, first_dur)) = runs.first() else {
            return Ok(OpTimes::default());
        };
        let after_first = first_ts + first_dur;
        let mut per_op: BTreeMap<String, f64> = BTreeMap::new();
        for e in events.iter().filter(|e| e["cat"] == "Node") {
            let kernel = e["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("_kernel_time"));
            let (Some(op), Some((ts, dur))) = (e["args"]["op_name"].as_str(), span(e)) else {
                continue;
            };
            if kernel && ts >= after_first {
                *per_op.entry(op.to_string()).or_default() += dur;
            }
        }
        Ok(OpTimes {
            per_op,
            runs: runs.len() - 1,
        })
    }

    /// Ends `session`'s profiling and reads what it wrote.
    pub(crate) fn of_session(session: &mut Session) -> Result<OpTimes> {
        let file = session.end_profiling().map_err(|e| anyhow!("{e}"))?;
        let text = std::fs::read_to_string(Path::new(&file))
            .with_context(|| format!("{file}: cannot read ONNX Runtime's profile"))?;
        OpTimes::from_profile(&text).with_context(|| file.clone())
    }

    /// Adds another session's times.
    pub fn add(&mut self, other: OpTimes) {
        for (op, us) in other.per_op {
            *self.per_op.entry(op).or_default() += us;
        }
        self.runs += other.runs;
    }

    /// The note: each op type's share of the node time and its milliseconds per run, the
    /// largest first, `timed` saying what the times are.
    pub fn said(&self, timed: &str) -> String {
        let total: f64 = self.per_op.values().sum();
        if self.runs == 0 || total <= 0.0 {
            return "op profile: no run after the first reached ONNX Runtime's profiler (CUDA graph replays bypass it)".into();
        }
        let mut ops: Vec<(&String, &f64)> = self.per_op.iter().collect();
        ops.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
        let per_run = |us: f64| us / 1e3 / self.runs as f64;
        let mut parts: Vec<String> = ops
            .iter()
            .take(NAMED)
            .map(|(op, &us)| format!("{op} {:.1}% ({:.3} ms)", us / total * 100.0, per_run(us)))
            .collect();
        if ops.len() > NAMED {
            let rest: f64 = ops[NAMED..].iter().map(|(_, &us)| us).sum();
            parts.push(format!(
                "{} other types {:.1}%",
                ops.len() - NAMED,
                rest / total * 100.0
            ));
        }
        format!(
            "op profile over {} runs ({timed}; {:.3} ms of nodes a run): {}",
            self.runs,
            per_run(total),
            parts.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, ts: f64, dur: f64) -> String {
        format!(
            r#"{{"cat":"Node","name":"n_{op}_{ts}_kernel_time","ts":{ts},"dur":{dur},"args":{{"op_name":"{op}","provider":"CPUExecutionProvider"}}}}"#
        )
    }

    fn run(ts: f64, dur: f64) -> String {
        format!(r#"{{"cat":"Session","name":"model_run","ts":{ts},"dur":{dur}}}"#)
    }

    #[test]
    fn the_first_run_is_left_out_and_the_rest_summed_per_op_type() {
        let events = [
            run(0.0, 100.0),
            node("Conv", 10.0, 90.0), // the first run: left out
            run(200.0, 50.0),
            node("Conv", 200.0, 30.0),
            node("Relu", 230.0, 10.0),
            run(300.0, 50.0),
            node("Conv", 300.0, 30.0),
            node("Relu", 330.0, 10.0),
            r#"{"cat":"Node","name":"n_fence_before","ts":310,"dur":5,"args":{"op_name":"Relu"}}"#
                .into(),
        ];
        let text = format!("[{}]", events.join(","));
        let times = OpTimes::from_profile(&text).unwrap();
        assert_eq!(times.runs, 2);
        assert_eq!(times.per_op["Conv"], 60.0);
        assert_eq!(times.per_op["Relu"], 20.0);
        assert_eq!(
            times.said("host times"),
            "op profile over 2 runs (host times; 0.040 ms of nodes a run): Conv 75.0% (0.030 ms), Relu 25.0% (0.010 ms)"
        );
    }

    #[test]
    fn sessions_add_up_and_a_profile_without_runs_says_so() {
        let mut a = OpTimes::from_profile(&format!(
            "[{},{},{},{}]",
            run(0.0, 1.0),
            run(2.0, 1.0),
            node("MatMul", 2.0, 1.0),
            node("Attention", 2.5, 3.0)
        ))
        .unwrap();
        let b = a.clone();
        a.add(b);
        assert_eq!(a.runs, 2);
        assert_eq!(a.per_op["Attention"], 6.0);
        let none = OpTimes::from_profile("[]").unwrap();
        assert!(none.said("x").contains("no run after the first"));
        assert!(OpTimes::from_profile("{").is_err());
    }

    #[test]
    fn past_eight_op_types_the_rest_are_summed() {
        let mut events = vec![run(0.0, 1.0), run(10.0, 100.0)];
        for (k, op) in ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"]
            .iter()
            .enumerate()
        {
            events.push(node(op, 10.0 + k as f64, 10.0 - k as f64));
        }
        let said = OpTimes::from_profile(&format!("[{}]", events.join(",")))
            .unwrap()
            .said("t");
        assert!(said.contains("A 18.2%"), "{said}");
        assert!(said.ends_with("2 other types 5.5%"), "{said}");
        assert!(!said.contains(" I "), "{said}");
    }
}
