//! `trtkit doctor`: what this machine offers for trtkit.

use crate::cuda::info::{driver_info, DriverInfo};
use crate::report::format::{bytes, json};
use crate::trt::loader::{can_run_on, probe_tensorrt, LibraryProbe};
use clap::Args;
use serde::Serialize;

/// Flags of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Everything `doctor` found.
#[derive(Debug, Serialize)]
pub struct DoctorReport {
    /// Version of this trtkit binary.
    pub trtkit_version: String,
    /// Git commit the binary was built from.
    pub git_commit: String,
    /// CUDA driver and GPUs.
    pub cuda: DriverInfo,
    /// TensorRT libraries.
    pub tensorrt: Vec<LibraryProbe>,
    /// Per found TensorRT flavour and GPU: whether its engines run there, and why not.
    pub engine_support: Vec<EngineSupport>,
    /// Execution backends compiled into this binary.
    pub backends: Vec<String>,
}

/// Whether one TensorRT flavour's engines run on one GPU.
#[derive(Debug, Serialize)]
pub struct EngineSupport {
    /// The flavour.
    pub flavour: String,
    /// The GPU's index.
    pub gpu: i32,
    /// Whether its engines run there.
    pub runs: bool,
    /// The sentence saying so (and what to do when not).
    pub reason: String,
}

/// Execution backends compiled into this binary (grows as backends land).
pub fn compiled_backends() -> Vec<String> {
    vec!["tract-cpu".into(), "tract-cuda".into(), "ort-cpu".into()]
}

/// Collects the report.
pub fn collect() -> DoctorReport {
    let cuda = driver_info();
    let tensorrt = probe_tensorrt();
    let mut engine_support = Vec::new();
    for lib in tensorrt.iter().filter(|l| l.found) {
        if engine_support
            .iter()
            .any(|e: &EngineSupport| e.flavour == lib.flavour.to_string())
        {
            continue;
        }
        for g in &cuda.gpus {
            let (runs, reason) = can_run_on(lib.flavour, &g.name, &g.compute_capability);
            engine_support.push(EngineSupport {
                flavour: lib.flavour.to_string(),
                gpu: g.index,
                runs,
                reason,
            });
        }
    }
    DoctorReport {
        trtkit_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: env!("TRTKIT_GIT_COMMIT").into(),
        cuda,
        tensorrt,
        engine_support,
        backends: compiled_backends(),
    }
}

/// Runs `doctor`; it succeeds on a machine with no GPU and says so.
pub fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let report = collect();
    let text = if args.json {
        json(&report)?
    } else {
        render(&report)
    };
    print!("{text}");
    Ok(())
}

/// The terminal rendering of the report.
pub fn render(r: &DoctorReport) -> String {
    let mut out = format!("trtkit {} (commit {})\n\n", r.trtkit_version, r.git_commit);
    match (&r.cuda.driver_cuda_version, &r.cuda.error) {
        (Some(v), _) => {
            let driver = r
                .cuda
                .driver_version
                .as_deref()
                .map(|d| format!("{d}, "))
                .unwrap_or_default();
            out += &format!("CUDA driver  found: {driver}supports CUDA {v}\n")
        }
        (None, Some(e)) => out += &format!("CUDA driver  {e}\n"),
        (None, None) => out += "CUDA driver  not found\n",
    }
    if r.cuda.gpus.is_empty() {
        out += "GPUs         none: this machine has no usable NVIDIA GPU; GPU commands will fail, CPU backends work\n";
    }
    for g in &r.cuda.gpus {
        out += &format!(
            "GPU {}        {}, {}, compute capability {}\n",
            g.index,
            g.name,
            bytes(g.memory_bytes),
            g.compute_capability
        );
    }
    for lib in &r.tensorrt {
        let line = match (lib.found, &lib.version, &lib.path) {
            (true, v, p) => format!(
                "{} {}{}{}",
                lib.flavour,
                v.as_deref().unwrap_or("(version unknown)"),
                p.as_ref().map(|p| format!(", {p}")).unwrap_or_default(),
                lib.source
                    .as_ref()
                    .map(|s| format!(" (from {s})"))
                    .unwrap_or_default()
            ),
            (false, _, _) if lib.library == "libtensorrt_rtx" => format!(
                "not found (tried {}); `trtkit build` needs it: {}",
                lib.tried.join(", "),
                crate::trt::loader::RTX_PIP
            ),
            (false, _, _) => format!(
                "not found (tried {}); install TensorRT and put its lib folder on LD_LIBRARY_PATH",
                lib.tried.join(", ")
            ),
        };
        out += &format!("{:<16} {line}\n", lib.library);
    }
    for e in &r.engine_support {
        out += &format!(
            "engines on GPU {}  {}: {}\n",
            e.gpu,
            if e.runs { "yes" } else { "no" },
            e.reason
        );
    }
    let backends = if r.backends.is_empty() {
        "none yet".to_string()
    } else {
        r.backends.join(", ")
    };
    out += &format!("backends     {backends}\n");
    out
}
