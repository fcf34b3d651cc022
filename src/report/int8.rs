//! The reports of the INT8 triage: the sensitivity table (one row per quantized node, most
//! damaging first) and what the accuracy-target search left in float.

use crate::quantize::adaptive_rounding::RoundingReport;
use crate::quantize::check_split::{CheckOrigin, SplitKind};
use crate::quantize::evaluate::{MeasuredReport, SampleUse, Score, WeightRounding};
use crate::quantize::scale_search::ScaleSearchReport;
use crate::quantize::sensitivity_scan::SensitivityReport;
use crate::quantize::target_search::{Goal, Strategy};
use crate::report::table::{Align, Table};

fn agreement(s: &Score) -> String {
    s.top1_agreement_pct
        .map_or("-".into(), |a| format!("{a:.1}"))
}

/// A score with its 95% intervals and the samples it is on.
pub(crate) fn score_line(s: &Score) -> String {
    let [clo, chi] = s.cosine_interval;
    let top1 = match (s.top1_agreement_pct, s.top1_agreement_interval) {
        (Some(a), Some([lo, hi])) => format!("{a:.1}% [{lo:.1}, {hi:.1}]"),
        (Some(a), None) => format!("{a:.1}%"),
        _ => "-".into(),
    };
    format!(
        "cosine {:.5} [{clo:.5}, {chi:.5}], top-1 agreement {top1}, MAE {:.4} ({} samples)",
        s.cosine, s.mae, s.samples
    )
}

/// The scores of a target search's report: every candidate node in `precision` and the written
/// model, each on the tuning samples and (where there is one) the check set, then the notes.
pub(crate) fn scores_lines(
    precision: &str,
    every_node: (&Score, Option<&Score>),
    written: (&Score, Option<&Score>),
    notes: &[String],
) -> String {
    let mut out = format!(
        "  every node in {precision}, tuning: {}\n",
        score_line(every_node.0)
    );
    if let Some(c) = every_node.1 {
        out += &format!("                      check:  {}\n", score_line(c));
    }
    out += &format!("  written model, tuning:      {}\n", score_line(written.0));
    if let Some(c) = written.1 {
        out += &format!("                 check:       {}\n", score_line(c));
    }
    for note in notes {
        out += &format!("  note: {note}\n");
    }
    out
}

/// The last line of a target search's report: the kept result it reused, or how many variants
/// it measured, how, in how long, and where the result is kept.
pub(crate) fn search_line(
    reused: bool,
    result: &str,
    variants: usize,
    strategy: Strategy,
    wall_s: f64,
) -> String {
    if reused {
        return format!("  reused the search kept in {result} (--research searches again)\n");
    }
    let how = match strategy {
        Strategy::Bisect => "bisection",
        Strategy::Greedy => "greedy",
    };
    format!("  {variants} variants ({how} search) in {wall_s:.1} s; kept in {result}\n")
}

/// Which samples the scores are on: tuned on, checked on, and what was left out.
pub(crate) fn samples_line(u: &SampleUse) -> String {
    let mut line = format!("  samples: {} tuned on", u.tune);
    if u.check > 0 {
        line += &format!(
            ", {} checked on (check set: {}{})",
            u.check,
            u.check_from,
            origin_note(&u.check_origin)
        );
    } else {
        line += ", no check set";
    }
    if u.left_out > 0 {
        line += &format!(
            "; {} more in the sources left out by --eval-samples",
            u.left_out
        );
    }
    line += "; [..] are 95% intervals (bootstrap for the cosine, Wilson for top-1)\n";
    if let Some(w) = &u.check_origin.warning {
        line += &format!("  warning: {w}\n");
    }
    line
}

/// How the check samples were chosen and what they share with the tuning samples.
fn origin_note(o: &CheckOrigin) -> String {
    let how = match o.split {
        SplitKind::ByFile => "; split by file",
        SplitKind::BySample => "; split by sample",
        SplitKind::Separate | SplitKind::None => "",
    };
    if o.tune_files == 0 && o.check_files == 0 {
        return how.to_string();
    }
    let shared = match o.shared_files.len() {
        0 => "none shared".to_string(),
        n => format!("{n} shared"),
    };
    format!(
        "{how}; {} file{} tuned on, {} checked on, {shared}",
        o.tune_files,
        if o.tune_files == 1 { "" } else { "s" },
        o.check_files
    )
}

/// The line saying what the activation scale search changed (empty when it did not run).
pub(crate) fn scale_search_line(r: Option<&ScaleSearchReport>) -> String {
    let Some(r) = r else {
        return String::new();
    };
    let (before, after) = r.choices.iter().fold((0.0, 0.0), |(b, a), c| {
        (b + c.calibrated_error, a + c.error)
    });
    let mut out = format!(
        "  activation scales searched on {} samples: {} of {} changed; the reading layers' relative error {:.3e} -> {:.3e} ({} probed)\n",
        r.samples, r.changed, r.tensors, before, after, r.probed
    );
    if let Some(v) = &r.verdict {
        let samples = match v.judged_on.as_str() {
            "check" => "the check samples",
            _ => "the tuning samples (no check set)",
        };
        out += &if v.kept_plain {
            format!(
                "  the calibration cache's scales are kept: the whole INT8 model's cosine on {samples} is {:.5} with them, {:.5} with the searched ones\n",
                v.plain_cosine, v.searched_cosine
            )
        } else {
            format!(
                "  the searched scales are kept: the whole INT8 model's cosine on {samples} is {:.5} with them, {:.5} with the cache's\n",
                v.searched_cosine, v.plain_cosine
            )
        };
    }
    out
}

/// The line saying what adaptive rounding changed (empty when it did not run).
pub(crate) fn rounding_line(r: Option<&RoundingReport>) -> String {
    let Some(r) = r else {
        return String::new();
    };
    let kept = if r.kept_nearest.is_empty() {
        String::new()
    } else {
        format!("; {} weights kept at nearest", r.kept_nearest.len())
    };
    format!(
        "  weights rounded adaptively in {} layers: {} of {} values off nearest; the layers' mean relative output error {:.3e} -> {:.3e}{kept}\n",
        r.layers.len(),
        r.changed,
        r.weights,
        r.mean_nearest_error,
        r.mean_adaptive_error
    )
}

/// The sensitivity table for the terminal.
pub(crate) fn render_sensitivity(r: &SensitivityReport) -> String {
    let mut out = format!(
        "{}: {} quantized nodes measured on {} tuning samples of {} ({} variants, {:.1} s); float part in {}\n",
        r.model,
        r.nodes.len(),
        r.samples.tune,
        r.eval_data,
        r.variants,
        r.wall_s,
        r.fallback
    );
    if r.excluded.is_empty() {
        out += &format!("every node in INT8: {}\n", score_line(&r.full_int8));
    } else {
        out += &format!(
            "every node in INT8 but {} (in float in every variant): {}\n",
            r.excluded.join(", "),
            score_line(&r.full_int8)
        );
    }
    out += &scale_search_line(r.scale_search.as_ref());
    out += &samples_line(&r.samples);
    out += "\n";
    let mut t = Table::new(&[
        "#",
        "node",
        "op",
        "MACs %",
        "alone: cosine",
        "top-1 %",
        "MAE",
        "left float: cosine",
        "top-1 %",
        "recovery",
    ])
    .with_align(&[
        Align::Right,
        Align::Left,
        Align::Left,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
    ]);
    for (i, n) in r.nodes.iter().enumerate() {
        t.row(vec![
            (i + 1).to_string(),
            n.name.clone(),
            n.op.clone(),
            format!("{:.2}", n.macs_pct),
            format!("{:.5}", n.alone.cosine),
            agreement(&n.alone),
            format!("{:.4}", n.alone.mae),
            format!("{:.5}", n.left_float.cosine),
            agreement(&n.left_float),
            format!("{:+.5}", n.recovery),
        ]);
    }
    out + &t.render()
}

/// A target search's verdict, INT8's or FP16's: met or not, and on which samples; `in_float`
/// names what the search left in float when even that missed (every quantized node, every
/// candidate node).
pub(crate) fn target_verdict(
    met: bool,
    met_on_tuning: bool,
    check: Option<&Score>,
    in_float: &str,
) -> String {
    match (met, check) {
        (true, Some(c)) => format!(
            "met on the {} check samples the search never tuned on",
            c.samples
        ),
        (true, None) => "met on the samples the search tuned on (no check set)".into(),
        (false, Some(_)) if met_on_tuning => {
            "NOT met on the check samples (met on the tuning samples)".into()
        }
        (false, _) => format!("NOT met, even with {in_float}"),
    }
}

/// A target search's goal, as its line says it.
pub(crate) fn goal_text(goal: &Goal) -> String {
    match goal {
        Goal::Cosine(c) => format!("cosine ≥ {c}"),
        Goal::Agreement(p) => format!("top-1 agreement ≥ {p}%"),
    }
}

/// What `quantize --int8 --eval-data` wrote, for the terminal.
pub(crate) fn render_measured(r: &MeasuredReport) -> String {
    let mut out = format!(
        "wrote {} (int8{}{})\n",
        r.output,
        if r.bias_correction {
            ", biases corrected"
        } else {
            ""
        },
        match r.weight_rounding {
            WeightRounding::Adaptive => ", weights rounded adaptively",
            WeightRounding::Nearest => "",
        }
    );
    out += &format!("  tuning: {}\n", score_line(&r.score));
    if let Some(c) = &r.check {
        out += &format!("  check:  {}\n", score_line(c));
    }
    if !r.float_nodes.is_empty() {
        out += &format!("  left in float: {}\n", r.float_nodes.join(", "));
    }
    if let Some(share) = r.int8_share {
        out += &format!("  INT8 share of the MACs: {:.1}%\n", 100.0 * share);
    }
    out += &scale_search_line(r.scale_search.as_ref());
    out += &rounding_line(r.rounding.as_ref());
    out + &samples_line(&r.samples)
}
