//! The report of `inspect`: an ONNX model's summary or an engine file's description, for the
//! terminal.

use crate::jobs::inspect::InspectReport;
use crate::onnx::summary::ModelSummary;
use crate::report::format::{bytes, count};
use crate::report::table::{Align, Table};
use crate::trt::inspect::EngineInspection;
use crate::trt::profile::format_shape;

/// The terminal rendering of what `inspect` found: [`render`] for a model, [`render_engine`]
/// for an engine file.
pub(crate) fn render_report(r: &InspectReport) -> String {
    match r {
        InspectReport::Onnx(s) => render(s),
        InspectReport::Engine(e) => render_engine(e),
    }
}

/// The `compute` line: MACs per sample and their split by op, a lower bound when some counted
/// ops were left out, or why they are unknown and the flag that fixes it.
fn compute_line(s: &ModelSummary) -> String {
    let Some(m) = &s.macs else {
        return match (&s.macs_missing, &s.macs_fix) {
            (Some(why), Some(fix)) => format!("compute     MACs unknown: {why}; {fix}\n"),
            (Some(why), None) => format!("compute     MACs unknown: {why}\n"),
            (None, _) => String::new(),
        };
    };
    let by_op: Vec<String> = s
        .macs_by_op()
        .iter()
        .map(|(op, n)| format!("{op} {:.1}%", 100.0 * *n as f64 / m.total.max(1) as f64))
        .collect();
    let split = if by_op.is_empty() {
        String::new()
    } else {
        format!(": {}", by_op.join(", "))
    };
    let flops = si(2.0 * m.total as f64);
    if m.left_out.is_empty() {
        return format!(
            "compute     {} MACs per sample ({flops}FLOPs){split}\n",
            count(m.total)
        );
    }
    let left: Vec<String> = m
        .left_out
        .iter()
        .map(|l| format!("{} of {} {}", l.count, l.of, l.op))
        .collect();
    if m.nodes.is_empty() {
        return format!(
            "compute     MACs unknown: {} left out: shapes unknown\n",
            left.join(", ")
        );
    }
    format!(
        "compute     MACs ≥ {} per sample ({flops}FLOPs){split}; {} left out: shapes unknown\n",
        count(m.total),
        left.join(", ")
    )
}

/// The terminal rendering of an ONNX model summary: header lines, the I/O table, op counts,
/// the largest initializers, and every node when the summary lists them.
pub fn render(s: &ModelSummary) -> String {
    let mut out = String::new();
    let opsets: Vec<String> = s
        .opsets
        .iter()
        .map(|o| format!("{} {}", o.domain, o.version))
        .collect();
    out += &format!("model       {}\n", s.path);
    out += &format!("producer    {}\n", s.producer);
    out += &format!("ir version  {}\n", s.ir_version);
    out += &format!("opsets      {}\n", opsets.join(", "));
    out += &format!("file size   {}\n", bytes(s.file_bytes));
    let held = match (s.initializer_count, s.constant_weights) {
        (_, 0) => format!("{} initializers", count(s.initializer_count as u64)),
        (0, c) => format!("{} Constant nodes", count(c as u64)),
        (i, c) => format!(
            "{} initializers and {} Constant nodes",
            count(i as u64),
            count(c as u64)
        ),
    };
    out += &format!(
        "parameters  {} in {held}, {}{}{}\n",
        count(s.parameters),
        bytes(s.weight_bytes),
        if s.external_weight_bytes > 0 {
            format!(" ({} in external data)", bytes(s.external_weight_bytes))
        } else {
            String::new()
        },
        if s.constant_weights > 0 {
            format!(
                "; {} of them in Constant nodes, which the FP16 and INT8 rewrites treat as weights",
                count(s.constant_parameters)
            )
        } else {
            String::new()
        }
    );
    out += &format!("nodes       {}\n", count(s.node_count as u64));
    out += &compute_line(s);
    out += "\n";

    let mut io = Table::new(&["", "name", "dtype", "shape"]).with_align(&[Align::Left; 4]);
    for (kind, list) in [("input", &s.inputs), ("output", &s.outputs)] {
        for t in list {
            io.row(vec![
                kind.into(),
                t.name.clone(),
                t.dtype.clone(),
                t.shape_string(),
            ]);
        }
    }
    out += &io.render();

    let mut ops = Table::new(&["op", "count"]);
    for o in &s.ops {
        ops.row(vec![o.op.clone(), o.count.to_string()]);
    }
    if !ops.is_empty() {
        out += "\n";
        out += &ops.render();
    }

    let mut inits = Table::new(&["largest initializers", "dtype", "shape", "size"]).with_align(&[
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Right,
    ]);
    for i in &s.largest_initializers {
        let dims: Vec<String> = i.dims.iter().map(|d| d.to_string()).collect();
        let shape = if dims.is_empty() {
            "scalar".into()
        } else {
            dims.join("×")
        };
        let size = if i.external {
            format!("{} (external)", bytes(i.bytes))
        } else {
            bytes(i.bytes)
        };
        inits.row(vec![i.name.clone(), i.dtype.clone(), shape, size]);
    }
    if !inits.is_empty() {
        out += "\n";
        out += &inits.render();
    }

    if let Some(layers) = &s.layers {
        out += "\n";
        for (i, l) in layers.iter().enumerate() {
            let name = if l.name.is_empty() {
                "(unnamed)"
            } else {
                &l.name
            };
            let macs = l
                .macs
                .map(|m| format!("  [{} MACs]", count(m)))
                .unwrap_or_default();
            out += &format!(
                "{i:>5}  {name}  {}  {} → {}{macs}\n",
                l.op,
                l.inputs.join(", "),
                l.outputs.join(", ")
            );
        }
    }
    out
}

/// `4.09 G`-style: two decimals and an SI prefix (then the unit).
fn si(v: f64) -> String {
    let (scaled, prefix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .iter()
        .find(|(f, _)| v >= *f)
        .map_or((v, ""), |(f, p)| (v / f, *p));
    format!("{scaled:.2} {prefix}")
}

/// The terminal rendering of an engine file's description: flavour, size, and what its
/// sidecar says (source model, key, I/O with the profile's shapes), then its layers if listed.
pub(crate) fn render_engine(e: &EngineInspection) -> String {
    let mut out = format!(
        "engine      {}
",
        e.path
    );
    out += &format!(
        "flavour     {}
",
        e.flavour
    );
    out += &format!(
        "file size   {}
",
        bytes(e.file_bytes)
    );
    match &e.sidecar {
        Some(s) => {
            let k = &s.key;
            let f = &s.facts;
            out += &format!(
                "built from  {} (sha256 {}…)
",
                f.source_model,
                k.model_hash8()
            );
            out += &format!(
                "built with  {} {}, trtkit {}, in {:.2} s
",
                k.tensorrt_flavour, k.tensorrt_version, k.trtkit_version, f.build_s
            );
            out += &format!(
                "precision   {}
",
                k.precision
            );
            if let Some(c) = &k.calibration {
                out += &format!(
                    "calibration key {}…
",
                    &c[..8.min(c.len())]
                );
            }
            out += &format!(
                "network     {} layers from {} ONNX nodes, {} parameters
\n",
                f.network_layers,
                count(f.onnx_nodes as u64),
                count(f.parameters)
            );
            let mut io = Table::new(&["", "name", "dtype", "shape", "min", "opt", "max"])
                .with_align(&[Align::Left; 7]);
            let dims = format_shape;
            for t in &f.io {
                let p = k.profile.inputs.iter().find(|p| p.name == t.name);
                io.row(vec![
                    t.io.clone(),
                    t.name.clone(),
                    t.dtype.clone(),
                    dims(&t.dims),
                    p.map(|p| dims(&p.min)).unwrap_or_default(),
                    p.map(|p| dims(&p.opt)).unwrap_or_default(),
                    p.map(|p| dims(&p.max)).unwrap_or_default(),
                ]);
            }
            out += &io.render();
        }
        None => {
            out += &format!(
                "sidecar     {}\n",
                e.sidecar_problem.as_deref().unwrap_or("none")
            );
        }
    }
    if let Some(layers) = &e.layers {
        out += "\n";
        for (i, l) in layers.iter().enumerate() {
            out += &format!("{i:>5}  {l}\n");
        }
    }
    if let Some(why) = &e.layers_unavailable {
        out += &format!("\nlayers: not listed: {why}\n");
    }
    out
}
