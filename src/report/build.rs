//! The report of `build` (and of saved build reports): which engine was built or reused and why,
//! its profile, precision and network, and the time per phase.

use crate::jobs::build::{BuildReport, Int8Summary};
use crate::report::calibration::cache_lines;
use crate::report::format::bytes;
use crate::trt::profile::format_shape;

/// The terminal rendering of a build report: the calibration lines (INT8), built or reused and
/// why, then the profile, precision, network and where the time went.
pub fn render(r: &BuildReport) -> String {
    let mut out = String::new();
    if let Some(cal) = r.int8.as_ref().and_then(|i| i.calibration.as_ref()) {
        for line in cache_lines(cal) {
            out += &format!("{line}\n");
        }
    }
    let k = &r.key;
    if r.reused {
        out += &format!(
            "reusing {} ({}): its key matches (model {}, {}, {}, {} {}); --rebuild builds it again\n",
            r.engine,
            bytes(r.engine_bytes),
            k.model_hash8(),
            k.precision,
            k.profile.file_tag(),
            r.tensorrt.flavour,
            k.tensorrt_version
        );
    } else {
        for why in &r.rebuilt_because {
            out += &format!("rebuilding: {why}\n");
        }
        out += &format!(
            "built {} ({}) with {} {} in {:.2} s\n",
            r.engine,
            bytes(r.engine_bytes),
            r.tensorrt.flavour,
            r.tensorrt.version,
            r.timing.total_s
        );
    }
    for (i, line) in k.profile.describe().iter().enumerate() {
        let label = if i == 0 { "profile" } else { "" };
        out += &format!("  {label:<10}{line}\n");
    }
    if r.default_batch_range {
        out += &format!(
            "  {:<10}default batch range; set --min-batch/--opt-batch/--max-batch\n",
            ""
        );
    }
    let precision = match (&r.fp16, &r.int8) {
        (Some(f), _) => format!(
            "fp16: {} initializers converted, {} casts, {} nodes kept in float32",
            f.converted_initializers, f.casts, f.kept_fp32_nodes
        ),
        (_, Some(i)) => format!(
            "int8: scales from {}{}{}",
            i.cache,
            match (i.rewrite.quantized_activations, i.rewrite.quantized_weights) {
                (Some(a), Some(w)) => format!(", {a} activations and {w} weights quantized"),
                _ => String::new(),
            },
            int8_float_part(i)
        ),
        _ => k.precision.to_string(),
    };
    out += &format!("  {:<10}{precision}\n", "precision");
    let io: Vec<String> = r
        .facts
        .io
        .iter()
        .map(|t| format!("{} {} {} {}", t.io, t.name, t.dtype, format_shape(&t.dims)))
        .collect();
    out += &format!(
        "  {:<10}{} layers; {}\n",
        "network",
        r.facts.network_layers,
        io.join("; ")
    );
    if !r.reused {
        let t = &r.timing;
        out += &format!(
            "  {:<10}load {:.2} s, calibrate {:.2} s, rewrite {:.2} s, parse {:.2} s, build {:.2} s, write {:.2} s\n",
            "time", t.load_s, t.calibrate_s, t.rewrite_s, t.parse_s, t.build_s, t.write_s
        );
    }
    out
}

/// The nodes an INT8 build left out of INT8 and what its float part computes in, as a clause
/// (empty when every node the plan quantizes is INT8 and the float part is float32).
fn int8_float_part(i: &Int8Summary) -> String {
    let computing = i.rewrite.fallback.map(|f| format!(" (computing in {f})"));
    match (&i.rewrite.float_nodes, computing) {
        (Some(nodes), computing) if !nodes.is_empty() => format!(
            "; left out of INT8{}: {}",
            computing.unwrap_or_default(),
            nodes.join(", ")
        ),
        (_, Some(_)) => format!("; float part in {}", i.rewrite.fallback.unwrap_or_default()),
        _ => String::new(),
    }
}
