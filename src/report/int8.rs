//! The reports of the INT8 triage: the sensitivity table (one row per quantized node, most
//! damaging first) and what the accuracy-target search left in float.

use crate::quantize::evaluate::{MeasuredReport, Score};
use crate::quantize::scale_search::ScaleSearchReport;
use crate::quantize::sensitivity_scan::SensitivityReport;
use crate::quantize::target_search::{Goal, Strategy, TargetReport};
use crate::report::table::{Align, Table};

fn agreement(s: &Score) -> String {
    s.top1_agreement_pct
        .map_or("-".into(), |a| format!("{a:.1}"))
}

fn score_line(s: &Score) -> String {
    format!(
        "cosine {:.5}, top-1 agreement {}%, MAE {:.4}",
        s.cosine,
        agreement(s),
        s.mae
    )
}

/// The line saying what the activation scale search changed (empty when it did not run).
fn scale_search_line(r: Option<&ScaleSearchReport>) -> String {
    let Some(r) = r else {
        return String::new();
    };
    let (before, after) = r.choices.iter().fold((0.0, 0.0), |(b, a), c| {
        (b + c.calibrated_error, a + c.error)
    });
    format!(
        "  activation scales searched on {} samples: {} of {} changed; the reading layers' relative error {:.3e} -> {:.3e} ({} probed)\n",
        r.samples, r.changed, r.tensors, before, after, r.probed
    )
}

/// The sensitivity table for the terminal.
pub fn render_sensitivity(r: &SensitivityReport) -> String {
    let mut out = format!(
        "{}: {} quantized nodes measured on {} samples of {} ({} variants, {:.1} s); float part in {}\n",
        r.model,
        r.nodes.len(),
        r.samples,
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

/// What the target search did, for the terminal.
pub fn render_target(r: &TargetReport) -> String {
    let goal = match r.goal {
        Goal::Cosine(c) => format!("cosine ≥ {c}"),
        Goal::Agreement(p) => format!("top-1 agreement ≥ {p}%"),
    };
    let mut out = format!(
        "{} ({goal}): {}\n",
        r.output,
        if r.met {
            "met"
        } else {
            "NOT met, even with every quantized node in float"
        }
    );
    out += &format!("  every node in INT8:  {}\n", score_line(&r.full_int8));
    out += &format!("  written model:       {}\n", score_line(&r.score));
    out += &format!(
        "  left in float ({}): {}\n",
        r.float_nodes.len(),
        if r.float_nodes.is_empty() {
            "none".to_string()
        } else {
            r.float_nodes.join(", ")
        }
    );
    if let Some(share) = r.int8_share {
        out += &format!("  INT8 share of the MACs: {:.1}%\n", 100.0 * share);
    }
    out += &scale_search_line(r.scale_search.as_ref());
    out += &if r.reused {
        format!(
            "  reused the search kept in {} (--research searches again)\n",
            r.result
        )
    } else {
        format!(
            "  {} variants ({} search) measured on {} samples in {:.1} s; kept in {}\n",
            r.variants,
            match r.strategy {
                Strategy::Bisect => "bisection",
                Strategy::Greedy => "greedy",
            },
            r.samples,
            r.wall_s,
            r.result
        )
    };
    out
}

/// What `quantize --int8 --eval-data` wrote, for the terminal.
pub fn render_measured(r: &MeasuredReport) -> String {
    let mut out = format!(
        "wrote {} (int8{}): {}\n",
        r.output,
        if r.bias_correction {
            ", biases corrected"
        } else {
            ""
        },
        score_line(&r.score)
    );
    if !r.float_nodes.is_empty() {
        out += &format!("  left in float: {}\n", r.float_nodes.join(", "));
    }
    if let Some(share) = r.int8_share {
        out += &format!("  INT8 share of the MACs: {:.1}%\n", 100.0 * share);
    }
    out += &scale_search_line(r.scale_search.as_ref());
    out + &format!("  measured on {} samples\n", r.samples)
}
