//! The task tables of `compare`: for a detector, how many of the reference's boxes the side
//! under test found and how far their scores moved; for a segmenter, how many pixels kept
//! their class and the IoU per class; for a sequence, how many steps kept their best class and
//! how many CTC readings stayed the same.

use crate::metrics::sequence::SequenceComparison;
use crate::metrics::task::{DetectComparison, SegmentComparison, TaskComparison};
use crate::report::format::num;
use crate::report::table::Table;

/// A share in percent with two decimals, `-` when there is none.
pub(crate) fn pct(v: Option<f64>) -> String {
    v.map(|p| format!("{p:.2}")).unwrap_or_else(|| "-".into())
}

/// A value in [0, 1] with four decimals, `-` when there is none.
pub fn unit(v: Option<f64>) -> String {
    v.map(|p| format!("{p:.4}")).unwrap_or_else(|| "-".into())
}

/// The line that says which task was used and why.
pub(crate) fn task_line(t: &TaskComparison) -> String {
    let task = t
        .choice
        .task
        .map(|k| k.to_string())
        .unwrap_or_else(|| "none".into());
    if t.choice.guessed {
        format!(
            "task: {task} (guessed: {}; --task sets it)",
            t.choice.reason
        )
    } else {
        format!("task: {task}")
    }
}

fn detect_tables(d: &DetectComparison, show: &dyn Fn(&Table) -> String) -> String {
    let a = &d.agreement;
    let mut out = format!(
        "boxes of A: {}\nboxes of B (the reference): {}\ncounted from score {}, paired down to {} below it\n\n",
        d.source_a, d.source_b, d.conf, d.score_tolerance
    );
    if a.boxes_a == 0 && a.boxes_b == 0 {
        out += &format!(
            "no boxes on either side in {} images: nothing to match (see the note below)\n",
            a.images
        );
        return out;
    }
    let mut t = Table::new(&[
        "images",
        "boxes A",
        "boxes B",
        "matched @0.5 %",
        "matched @0.75 %",
        "only A",
        "only B",
        "matched IoU",
        "score shift",
        "max |shift|",
        "mAP@0.5",
        "mAP@0.5:0.95",
    ]);
    t.row(vec![
        a.images.to_string(),
        a.boxes_a.to_string(),
        a.boxes_b.to_string(),
        pct(a.matched_50_pct),
        pct(a.matched_75_pct),
        a.only_a.to_string(),
        a.only_b.to_string(),
        unit(a.matched_iou_mean),
        a.score_shift_mean.map(num).unwrap_or_else(|| "-".into()),
        a.score_shift_max_abs.map(num).unwrap_or_else(|| "-".into()),
        unit(a.map50),
        unit(a.map50_95),
    ]);
    out += &show(&t);
    if !a.worst_classes.is_empty() {
        out += "\nclasses with the most unmatched boxes at IoU 0.5\n\n";
        let mut w = Table::new(&["class", "only A", "only B"]);
        for c in &a.worst_classes {
            w.row(vec![
                c.class.to_string(),
                c.only_a.to_string(),
                c.only_b.to_string(),
            ]);
        }
        out += &show(&w);
    }
    out
}

fn segment_tables(s: &SegmentComparison, show: &dyn Fn(&Table) -> String) -> String {
    let a = &s.agreement;
    let mut t = Table::new(&[
        "output",
        "samples",
        "classes",
        "pixels",
        "pixel agreement %",
        "mIoU",
    ]);
    t.row(vec![
        s.output.clone(),
        a.samples.to_string(),
        a.classes.to_string(),
        a.pixels.to_string(),
        format!("{:.2}", a.pixel_agreement_pct),
        unit(a.miou),
    ]);
    let mut out = show(&t);
    if !a.most_changed.is_empty() {
        out += "\nclasses that changed most (B is the reference)\n\n";
        let mut c = Table::new(&["class", "pixels B", "pixels A", "changed", "IoU"]);
        for row in &a.most_changed {
            c.row(vec![
                row.class.to_string(),
                row.pixels_reference.to_string(),
                row.pixels_under_test.to_string(),
                row.changed.to_string(),
                unit(row.iou),
            ]);
        }
        out += &show(&c);
    }
    out
}

fn sequence_table(s: &SequenceComparison, show: &dyn Fn(&Table) -> String) -> String {
    let mut t = Table::new(&[
        "output",
        "samples",
        "steps",
        "classes",
        "step top-1 agreement %",
        "exact match %",
        "mean edit distance",
        "mean length B",
    ]);
    t.row(vec![
        s.output.clone(),
        s.samples.to_string(),
        s.steps.to_string(),
        s.classes.to_string(),
        format!("{:.2}", s.step_agreement_pct),
        format!("{:.2}", s.exact_match_pct),
        format!("{:.3}", s.mean_edit_distance),
        format!("{:.2}", s.mean_length_b),
    ]);
    format!(
        "sequences read with CTC: best class per step, repeats collapsed, blank class {} dropped\n\n{}",
        s.blank,
        show(&t)
    )
}

/// The task section of a compare report: the task line, then its tables.
pub(crate) fn render_task(t: &TaskComparison, show: &dyn Fn(&Table) -> String) -> String {
    let mut out = format!("\n{}\n\n", task_line(t));
    if let Some(d) = &t.detect {
        out += &detect_tables(d, show);
    }
    if let Some(s) = &t.segment {
        out += &segment_tables(s, show);
    }
    if let Some(s) = &t.sequence {
        out += &sequence_table(s, show);
    }
    out
}

/// The task table across precisions (one row per engine or graph that ran), in the shape of
/// the closeness table; `None` when no row has a detection, segmentation or sequence agreement.
pub fn precision_table(rows: &[(String, &TaskComparison)]) -> Option<Table> {
    if rows.iter().any(|(_, t)| t.detect.is_some()) {
        let mut t = Table::new(&[
            "Precision",
            "boxes",
            "matched @0.5 %",
            "matched @0.75 %",
            "only A",
            "only B",
            "score shift",
            "mAP@0.5",
            "mAP@0.5:0.95",
        ]);
        for (label, task) in rows {
            let Some(d) = &task.detect else { continue };
            let a = &d.agreement;
            t.row(vec![
                label.clone(),
                format!("{} / {}", a.boxes_a, a.boxes_b),
                pct(a.matched_50_pct),
                pct(a.matched_75_pct),
                a.only_a.to_string(),
                a.only_b.to_string(),
                a.score_shift_mean.map(num).unwrap_or_else(|| "-".into()),
                unit(a.map50),
                unit(a.map50_95),
            ]);
        }
        return Some(t);
    }
    if rows.iter().any(|(_, t)| t.segment.is_some()) {
        let mut t = Table::new(&[
            "Precision",
            "pixel agreement %",
            "mIoU",
            "most changed class",
        ]);
        for (label, task) in rows {
            let Some(s) = &task.segment else { continue };
            let a = &s.agreement;
            t.row(vec![
                label.clone(),
                format!("{:.2}", a.pixel_agreement_pct),
                unit(a.miou),
                a.most_changed
                    .first()
                    .map(|c| format!("{} ({} px)", c.class, c.changed))
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
        return Some(t);
    }
    if rows.iter().any(|(_, t)| t.sequence.is_some()) {
        let mut t = Table::new(&[
            "Precision",
            "step top-1 agreement %",
            "exact match %",
            "mean edit distance",
        ]);
        for (label, task) in rows {
            let Some(s) = &task.sequence else { continue };
            t.row(vec![
                label.clone(),
                format!("{:.2}", s.step_agreement_pct),
                format!("{:.2}", s.exact_match_pct),
                format!("{:.3}", s.mean_edit_distance),
            ]);
        }
        return Some(t);
    }
    None
}
