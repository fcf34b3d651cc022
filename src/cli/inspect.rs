//! `trtkit inspect MODEL.onnx`: the summary of an ONNX model.

use crate::onnx::summary::{summarize, ModelSummary};
use crate::onnx::OnnxModel;
use crate::report::format::{bytes, count, json};
use crate::report::table::{Align, Table};
use clap::Args;
use std::path::PathBuf;

/// Flags of `inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The ONNX model to summarize.
    pub model: PathBuf,
    /// Also list every node: name, op, inputs → outputs.
    #[arg(long)]
    pub layers: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `inspect`.
pub fn run(args: InspectArgs) -> anyhow::Result<()> {
    let model = OnnxModel::load(&args.model)?;
    let summary = summarize(&model, args.layers);
    let text = if args.json {
        json(&summary)?
    } else {
        render(&summary)
    };
    print!("{text}");
    Ok(())
}

/// The terminal rendering of a model summary.
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
    out += &format!(
        "parameters  {} in {} initializers, {}{}\n",
        count(s.parameters),
        count(s.initializer_count as u64),
        bytes(s.weight_bytes),
        if s.external_weight_bytes > 0 {
            format!(" ({} in external data)", bytes(s.external_weight_bytes))
        } else {
            String::new()
        }
    );
    out += &format!("nodes       {}\n\n", count(s.node_count as u64));

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
            out += &format!(
                "{i:>5}  {name}  {}  {} → {}\n",
                l.op,
                l.inputs.join(", "),
                l.outputs.join(", ")
            );
        }
    }
    out
}
