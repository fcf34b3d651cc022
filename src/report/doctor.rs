//! The report of `doctor`: what this machine offers trtkit, one line per fact.

use crate::backend::ort_libs::OrtProbe;
use crate::backend::tract_kernels::KernelModel;
use crate::data::decode::JpegDecoder;
use crate::jobs::doctor_check::{CheckReport, CheckStatus};
use crate::report::format::bytes;
use crate::trt::support::DoctorReport;

/// The terminal rendering of a doctor report: one line per fact, with what to do where
/// something is missing.
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
            (false, _, _) if lib.flavour == crate::trt::loader::BOUND.flavour => format!(
                "not found (tried {}); `trtkit build` needs it: {}",
                lib.tried.join(", "),
                crate::trt::loader::BOUND.install
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
    out += &ort_lines(&r.onnxruntime);
    let backends = if r.backends.is_empty() {
        "none yet".to_string()
    } else {
        r.backends.join(", ")
    };
    out += &format!("backends     {backends}\n");
    out += &format!("JPEG decoder {}\n", jpeg_line(&r.jpeg_decoder));
    if let Some(k) = &r.tract_kernels {
        out += &format!("tract kernels {}\n", kernels_line(k));
    }
    out
}

/// ONNX Runtime: the library, whether it loads, and its CUDA provider's libraries.
fn ort_lines(p: &OrtProbe) -> String {
    let mut out = match (&p.library, &p.error) {
        (Some(lib), None) => format!(
            "onnxruntime  {}, {} (from {}), {} build\n",
            p.version.as_deref().unwrap_or("(version unknown)"),
            lib.path.display(),
            lib.source,
            if lib.cuda_provider.is_some() {
                "GPU"
            } else {
                "CPU"
            }
        ),
        (_, Some(e)) => format!("onnxruntime  {e}\n"),
        (None, None) => "onnxruntime  not found\n".into(),
    };
    if p.library
        .as_ref()
        .is_some_and(|l| l.cuda_provider.is_some())
    {
        for d in &p.cuda_libraries {
            let at = match &d.path {
                Some(path) => path.display().to_string(),
                None => format!("not found (pip: {})", d.wheel),
            };
            out += &format!("  {:<18} {at}\n", d.library);
        }
    }
    out += &match &p.cuda_missing {
        None => "ort-cuda     ready: ONNX Runtime's CUDA provider and every library it loads were found\n".to_string(),
        Some(why) => format!("ort-cuda     not available: {why}\n"),
    };
    out
}

/// The `doctor --check` report: per GPU, one line per backend.
pub fn render_check(r: &CheckReport) -> String {
    let mut out = format!("check: {}\n", r.setup);
    if let Some(why) = &r.no_gpu {
        out += &format!("no GPU checked: {why}\n");
    }
    for g in &r.gpus {
        out += &format!(
            "GPU {} ({}, compute capability {})\n",
            g.gpu.index, g.gpu.name, g.gpu.compute_capability
        );
        for b in &g.backends {
            let status = match b.status {
                CheckStatus::Pass => "PASS",
                CheckStatus::Fail => "FAIL",
                CheckStatus::Skip => "SKIP",
            };
            let model = b
                .latency_model_ms
                .map(|m| format!(", latency-model {m:.3} ms"))
                .unwrap_or_default();
            out += &format!(
                "  {status} {:<13} {}{model} ({:.1} s)\n",
                b.backend, b.detail, b.seconds
            );
        }
    }
    out
}

/// tract's x86-64 kernel cost model and who chose it.
fn kernels_line(k: &KernelModel) -> String {
    match k.source.as_str() {
        "trtkit" => format!(
            "{} cost model (trtkit's default: it ran faster than the Intel one on the Intel Xeon measured, and is the native one on AMD; set TRACT_X86_KIND=intel|amd|other to choose)",
            k.model
        ),
        "CPUID" => "cost model of the CPU's vendor (read by tract)".into(),
        source => format!("{} cost model (set by {source})", k.model),
    }
}

/// The decoder and its SIMD state; without SIMD, what it costs and how to get it.
fn jpeg_line(d: &JpegDecoder) -> String {
    match d.simd {
        Some(true) => format!("{}, with SIMD", d.library),
        Some(false) => format!(
            "{}, WITHOUT SIMD: nasm was missing when trtkit was built, so decoding images (validate, calibrate) runs about 1.5-2x slower; install nasm (apt-get install nasm) and rebuild trtkit (cargo clean -p mozjpeg-sys first)",
            d.library
        ),
        None => format!("{}, SIMD unknown (the build could not read its configuration)", d.library),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoder_without_simd_says_how_to_get_it() {
        let decoder = |simd| JpegDecoder {
            library: "libjpeg-turbo".into(),
            simd,
        };
        assert_eq!(jpeg_line(&decoder(Some(true))), "libjpeg-turbo, with SIMD");
        let without = jpeg_line(&decoder(Some(false)));
        assert!(without.contains("WITHOUT SIMD") && without.contains("install nasm"));
        assert!(jpeg_line(&decoder(None)).contains("unknown"));
    }
}
