//! The report of `quantize`: the line that says what a rewrite (`--int8`, `--fp16`,
//! `--equalize`) wrote, and which renderer
//! draws each kind of outcome.

use crate::jobs::quantize::request::QuantizeOutcome;
use crate::jobs::quantize::QuantizeReport;
use crate::report::int8::{render_measured, render_sensitivity};
use crate::report::search::render_search;

/// What any `quantize` request printed: the rewrite's line or the triage's tables.
pub(crate) fn render_outcome(outcome: &QuantizeOutcome) -> String {
    match outcome {
        QuantizeOutcome::Rewrite(r) => render(r),
        QuantizeOutcome::Sensitivity(r) => render_sensitivity(r),
        QuantizeOutcome::Search(r) => render_search(r),
        QuantizeOutcome::Measured(r) => render_measured(r),
    }
}

/// The line that says what was written.
pub fn render(report: &QuantizeReport) -> String {
    let mut out = render_written(report);
    if let Some(on) = &report.checked_on {
        out += &format!("  checked: it opens on {on} (at batch 1)\n");
    }
    out
}

/// The line that says what the rewrite wrote.
fn render_written(report: &QuantizeReport) -> String {
    if let Some(e) = &report.equalize {
        return format!(
            "wrote {} (fp32, equalised): {} batch norms folded, {} conv pairs, {} sweeps; the worst pair's channel weight range spread {:.1}x -> {:.1}x; calibrate it, then quantize it with --int8\n",
            report.output,
            e.folded_batch_norms,
            e.pairs.len(),
            e.sweeps,
            e.spread_before,
            e.spread_after
        );
    }
    match &report.fp16 {
        Some(r) => {
            let mut out = format!(
                "wrote {} (fp16): {} initializers converted, {} casts, {} nodes kept in float32{}{}\n",
                report.output,
                r.converted_initializers,
                r.casts,
                r.kept_fp32_nodes,
                if r.kept_nodes.is_empty() {
                    String::new()
                } else {
                    format!(" (by name: {})", r.kept_nodes.join(", "))
                },
                if r.clamped.is_empty() {
                    String::new()
                } else {
                    format!(", clamped to ±65504: {}", r.clamped.join(", "))
                }
            );
            for w in &r.warnings {
                out += &format!("  warning: {w}\n");
            }
            out
        }
        None => {
            let mut line = format!(
                "wrote {} (int8): {} activations and {} weights quantized",
                report.output,
                report.int8.quantized_activations.unwrap_or(0),
                report.int8.quantized_weights.unwrap_or(0)
            );
            if let Some(share) = report.int8_share {
                line += &format!("; {:.1}% of the MACs in INT8", 100.0 * share);
            }
            match report.int8.float_nodes.as_deref() {
                Some([]) | None => {}
                Some(nodes) => {
                    line += &format!(
                        "; in {}: {}",
                        report.int8.fallback.unwrap_or_default(),
                        nodes.join(", ")
                    )
                }
            }
            line + "\n"
        }
    }
}
