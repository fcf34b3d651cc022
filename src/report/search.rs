//! A target search's report for the terminal, INT8 or FP16 alike: the verdict, the scores all in
//! the searched precision against the model written, what the precision's own part says, the
//! samples and where the result is kept.

use crate::quantize::search_report::{
    Fp16Search, Int8Search, KeepReason, SearchPrecision, SearchReport,
};
use crate::quantize::target_search::Goal;
use crate::report::int8::{
    goal_text, rounding_line, samples_line, scale_search_line, scores_lines, search_line,
    target_verdict,
};

/// What the target search did, for the terminal.
pub(crate) fn render_search(r: &SearchReport) -> String {
    let (label, tag, all_float, part) = match &r.precision {
        SearchPrecision::Int8(p) => (
            "INT8",
            "",
            "every quantized node in float",
            int8_lines(r, p),
        ),
        SearchPrecision::Fp16(p) => (
            "FP16",
            "fp16, ",
            "every candidate node in float32",
            fp16_search_lines(r, p),
        ),
    };
    let verdict = target_verdict(r.met, r.met_on_tuning, r.check.as_ref(), all_float);
    let mut out = format!("{} ({tag}{}): {verdict}\n", r.output, goal_text(&r.goal));
    out += &scores_lines(label, r.full(), (&r.score, r.check.as_ref()), &r.notes);
    out += &part;
    out += &samples_line(&r.samples);
    out += &search_line(r.reused, &r.result, r.variants, r.strategy, r.wall_s);
    out
}

/// What an INT8 search adds to its report's lines: the nodes left in float, the INT8 share of
/// the MACs, and what the scale search and adaptive rounding changed.
fn int8_lines(r: &SearchReport, p: &Int8Search) -> String {
    let mut out = format!(
        "  left in float ({}): {}\n",
        r.float_nodes.len(),
        if r.float_nodes.is_empty() {
            "none".to_string()
        } else {
            r.float_nodes.join(", ")
        }
    );
    if let Some(share) = p.int8_share {
        out += &format!("  INT8 share of the MACs: {:.1}%\n", 100.0 * share);
    }
    out += &scale_search_line(p.scale_search.as_ref());
    out += &rounding_line(p.rounding.as_ref());
    out
}

/// What an FP16 search adds to its report's lines: each node it kept in float32 and why, the
/// FP16 share of the MACs, and whether float16 was emulated.
fn fp16_search_lines(r: &SearchReport, p: &Fp16Search) -> String {
    let measure = match r.goal {
        Goal::Cosine(_) => "cosine",
        Goal::Agreement(_) => "top-1 agreement %",
    };
    let mut out = format!("  kept in float32 by the search ({}):", p.kept.len());
    out += if p.kept.is_empty() { " none\n" } else { "\n" };
    for k in &p.kept {
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
    if let Some(share) = p.fp16_share {
        out += &format!("  FP16 share of the MACs: {:.1}%\n", 100.0 * share);
    }
    if p.emulated {
        out += "  variants scored with float16 arithmetic emulated (the CPU backend computes float16 in float32)\n";
    }
    out
}
