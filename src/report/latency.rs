//! The latency report of `run` (and of saved run reports): the per-batch-size table for the
//! terminal or markdown, and the per-iteration export as CSV or JSON.

use crate::atomic_file::write_atomic;
use crate::jobs::run::{point_label, BatchResult, RunReport};
use crate::metrics::latency::{IterationSpans, Stats};
use crate::report::format::{bytes, json};
use crate::report::table::Table;
use anyhow::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// A statistic in ms with three decimals, or `-` where the span was not measured.
fn ms(s: Option<&Stats>, f: fn(&Stats) -> f64) -> String {
    s.map(|s| format!("{:.3}", f(s)))
        .unwrap_or_else(|| "-".into())
}

/// The swept axes' names, in order of first appearance.
fn dim_names(results: &[BatchResult]) -> Vec<String> {
    let mut names: Vec<String> = vec![];
    for n in results.iter().flat_map(|b| b.dims.keys()) {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    names
}

/// The terminal (or markdown) rendering: one row per batch size (and swept axis size, one
/// column per swept axis).
pub fn render(r: &RunReport, markdown: bool) -> String {
    let names = dim_names(&r.results);
    let headers: Vec<&str> = std::iter::once("batch")
        .chain(names.iter().map(String::as_str))
        .chain([
            "iters",
            "all mean ms",
            "all p99 ms",
            "all max ms",
            "model mean ms",
            "model p99 ms",
            "h2d ms",
            "d2h ms",
            "host ms",
            "samples/s",
            "GPU mem peak",
            "process peak",
        ])
        .collect();
    let mut t = Table::new(&headers);
    for b in &r.results {
        let l = &b.latency_ms;
        let mut cells = vec![b.batch.to_string()];
        cells.extend(names.iter().map(|n| {
            b.dims
                .get(n)
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into())
        }));
        cells.extend([
            b.iterations.to_string(),
            format!("{:.3}", l.all.mean),
            format!("{:.3}", l.all.p99),
            format!("{:.3}", l.all.max),
            ms(l.compute.as_ref(), |s| s.mean),
            ms(l.compute.as_ref(), |s| s.p99),
            ms(l.h2d.as_ref(), |s| s.mean),
            ms(l.d2h.as_ref(), |s| s.mean),
            format!("{:.3}", l.host.mean),
            format!("{:.1}", b.throughput),
            b.memory
                .as_ref()
                .map(|m| bytes(m.peak_used))
                .unwrap_or_else(|| "-".into()),
            b.memory
                .as_ref()
                .and_then(|m| m.process_peak)
                .map(bytes)
                .unwrap_or_else(|| "-".into()),
        ]);
        t.row(cells);
    }
    let mut out = format!("model  {}\n", r.model);
    if let Some(g) = &r.gpu {
        out += &format!("gpu    {g}\n");
    }
    for n in &r.notes {
        out += &format!("note   {n}\n");
    }
    out += "\n";
    out += &if markdown {
        t.render_markdown()
    } else {
        t.render()
    };
    let firsts: Vec<String> = r
        .results
        .iter()
        .map(|b| {
            format!(
                "{} {:.3} ms",
                point_label(b.batch, &b.dims),
                b.first_iteration_ms
            )
        })
        .collect();
    out += &format!(
        "first iteration (run on its own before the warm-up, left out of the statistics): {}\n",
        firsts.join(", ")
    );
    // Reports saved before the set-up was recorded read it as zero: no line for them.
    for b in r.results.iter().filter(|b| b.setup.total_ms > 0.0) {
        out += &format!("{}: {}\n", point_label(b.batch, &b.dims), b.setup.line());
    }
    for b in &r.results {
        if let Some(m) = &b.memory {
            out += &format!(
                "{}: GPU memory used {} before setup, {} after, peak {} (device-wide); this process held at most {} ({})\n",
                point_label(b.batch, &b.dims),
                bytes(m.before_setup.used()),
                bytes(m.after_setup.used()),
                bytes(m.peak_used),
                m.process_peak.map(bytes).unwrap_or_else(|| "? (NVML did not say)".into()),
                m.peak_method
            );
        }
    }
    out
}

/// CSV of every iteration: batch, the swept axes' sizes (a column each, when swept), index,
/// stream and each span in ms (empty where unknown).
pub(crate) fn times_csv(results: &[BatchResult]) -> String {
    let names = dim_names(results);
    let mut out = std::iter::once("batch")
        .chain(names.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(",");
    out += ",iteration,stream,h2d_ms,compute_ms,d2h_ms,all_ms,host_ms\n";
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.6}")).unwrap_or_default();
    for b in results {
        let lead = std::iter::once(b.batch.to_string())
            .chain(
                names
                    .iter()
                    .map(|n| b.dims.get(n).map(|v| v.to_string()).unwrap_or_default()),
            )
            .collect::<Vec<_>>()
            .join(",");
        for (i, s) in b.spans.iter().enumerate() {
            out += &format!(
                "{lead},{i},{},{},{},{},{:.6},{:.6}\n",
                s.stream,
                opt(s.h2d_ms),
                opt(s.compute_ms),
                opt(s.d2h_ms),
                s.all_ms,
                s.host_ms
            );
        }
    }
    out
}

/// Writes every measured iteration's spans to `path`: CSV ([`times_csv`]) when its extension
/// is `.csv`, otherwise JSON (per batch: backend, timing method, iterations); atomically.
pub(crate) fn export_times(path: &Path, results: &[BatchResult]) -> Result<()> {
    let csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let text = if csv {
        times_csv(results)
    } else {
        #[derive(Serialize)]
        struct Entry<'a> {
            batch: usize,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            dims: &'a BTreeMap<String, i64>,
            backend: &'a str,
            timing: &'a str,
            iterations: &'a [IterationSpans],
        }
        let entries: Vec<Entry> = results
            .iter()
            .map(|b| Entry {
                batch: b.batch,
                dims: &b.dims,
                backend: &b.backend,
                timing: &b.timing,
                iterations: &b.spans,
            })
            .collect();
        json(&entries)?
    };
    write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::latency::SpanStats;

    #[test]
    fn csv_leaves_unknown_spans_empty() {
        let spans = vec![IterationSpans::wall_only(1.5)];
        let r = BatchResult {
            batch: 2,
            dims: BTreeMap::new(),
            backend: "tract-cpu".into(),
            timing: "wall-clock".into(),
            iterations: 1,
            latency_ms: SpanStats::from_iterations(&spans).unwrap(),
            throughput: 1.0,
            wall_s: 1.0,
            first_iteration_ms: 3.0,
            setup: Default::default(),
            memory: None,
            spans,
        };
        assert_eq!(
            times_csv(&[r]),
            "batch,iteration,stream,h2d_ms,compute_ms,d2h_ms,all_ms,host_ms\n2,0,0,,,,1.500000,1.500000\n"
        );
    }
}
