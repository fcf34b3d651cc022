//! The report of `quantize`: the line that says what a rewrite (`--int8`, `--fp16`,
//! `--equalize`) wrote, what the FP16 target search kept in float32 and why, and which renderer
//! draws each kind of outcome.

use crate::jobs::quantize::request::QuantizeOutcome;
use crate::jobs::quantize::QuantizeReport;
use crate::quantize::fp16_search::{Fp16TargetReport, KeepReason};
use crate::quantize::target_search::Goal;
use crate::report::int8::{
    goal_text, render_measured, render_sensitivity, render_target, samples_line, scores_lines,
    search_line, target_verdict,
};

/// What any `quantize` request printed: the rewrite's line or the triage's tables.
pub(crate) fn render_outcome(outcome: &QuantizeOutcome) -> String {
    match outcome {
        QuantizeOutcome::Rewrite(r) => render(r),
        QuantizeOutcome::Sensitivity(r) => render_sensitivity(r),
        QuantizeOutcome::Target(r) => render_target(r),
        QuantizeOutcome::Fp16Target(r) => render_fp16_target(r),
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

/// What the FP16 target search wrote, what it kept in float32 and why, for the terminal.
pub(crate) fn render_fp16_target(r: &Fp16TargetReport) -> String {
    let goal = goal_text(&r.goal);
    let verdict = target_verdict(
        r.met,
        r.met_on_tuning,
        r.check.as_ref(),
        "every candidate node in float32",
    );
    let measure = match r.goal {
        Goal::Cosine(_) => "cosine",
        Goal::Agreement(_) => "top-1 agreement %",
    };
    let mut out = format!("{} (fp16, {goal}): {verdict}\n", r.output);
    out += &scores_lines(
        "FP16",
        (&r.full_fp16, r.full_fp16_check.as_ref()),
        (&r.score, r.check.as_ref()),
        &r.notes,
    );
    out += &format!("  kept in float32 by the search ({}):", r.kept.len());
    out += if r.kept.is_empty() { " none\n" } else { "\n" };
    for k in &r.kept {
        let why = match &k.why {
            KeepReason::Overflow { max_abs } => {
                format!("overflow: its FP32 output reaches {max_abs:.4e}, beyond ±65504")
            }
            KeepReason::MeasuredError { alone, recovers } => format!(
                "measured error: alone in float32, {measure} {}{}",
                alone.map_or("not measured".into(), |a| format!("{a:.7}")),
                recovers.map_or(String::new(), |g| format!(" ({g:+.2e} over all FP16)"))
            ),
        };
        out += &format!("    {} ({}): {why}\n", k.name, k.op);
    }
    if let Some(share) = r.fp16_share {
        out += &format!("  FP16 share of the MACs: {:.1}%\n", 100.0 * share);
    }
    if r.emulated {
        out += "  variants scored with float16 arithmetic emulated (the CPU backend computes float16 in float32)\n";
    }
    out += &samples_line(&r.samples);
    out += &search_line(r.reused, &r.result, r.variants, r.strategy, r.wall_s);
    out
}
