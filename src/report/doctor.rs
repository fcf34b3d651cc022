//! The report of `doctor`: what this machine offers trtkit, one line per fact.

use crate::backend::ort_libs::OrtProbe;
use crate::backend::tract_kernels::KernelModel;
use crate::data::decode::JpegDecoder;
use crate::jobs::doctor::check::{CheckReport, CheckStatus};
use crate::jobs::doctor::{DoctorReport, FlavourFit};
use crate::report::format::bytes;
use crate::trt::flavour::Needed;

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
    out += &flavour_lines(&r.tensorrt_flavour);
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

/// Which TensorRT this binary loads, and per GPU the one it needs, with the fix where they differ.
pub(crate) fn flavour_lines(fit: &FlavourFit) -> String {
    let other = match fit.binary {
        Needed::TensorRt => "the default build loads TensorRT-RTX",
        _ => "a build with `--features tensorrt` loads NVIDIA TensorRT 11",
    };
    let mut out = format!(
        "flavour      this trtkit loads {} ({other})\n",
        fit.binary.name()
    );
    for g in &fit.gpus {
        let cc = &g.compute_capability;
        let line = match (&g.fix, g.needs) {
            (Some(fix), needs) => format!(
                "needs {} (compute capability {cc}), not {}; fix: {fix}",
                needs.name(),
                fit.binary.name()
            ),
            (None, Needed::Unsupported) => format!(
                "needs what trtkit cannot load: compute capability {cc} is older than TensorRT 11 and TensorRT-RTX support (7.5 and later, on CUDA 13); CPU backends work"
            ),
            (None, needs) => format!(
                "needs {} (compute capability {cc}): this trtkit fits",
                needs.name()
            ),
        };
        out += &format!("  GPU {:<6} {line}\n", g.gpu);
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
pub(crate) fn render_check(r: &CheckReport) -> String {
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

    fn gpu(index: i32, cc: &str) -> crate::cuda::info::GpuInfo {
        crate::cuda::info::GpuInfo {
            index,
            name: format!("GPU of {cc}"),
            memory_bytes: 80 << 30,
            compute_capability: cc.into(),
            uuid: None,
        }
    }

    #[test]
    fn the_flavour_lines_name_what_each_gpu_needs_and_the_fix() {
        use crate::jobs::doctor::flavour_fit;
        use crate::trt::loader::Flavour;
        let gpus = [gpu(0, "9.0"), gpu(1, "8.9"), gpu(2, "6.1")];
        let text = flavour_lines(&flavour_fit(Flavour::TensorRtRtx, &gpus));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0].contains("this trtkit loads TensorRT-RTX"),
            "{text}"
        );
        assert!(lines[0].contains("--features tensorrt"), "{text}");
        assert!(lines[1].starts_with("  GPU 0") && lines[1].contains("needs NVIDIA TensorRT 11 (compute capability 9.0), not TensorRT-RTX; fix: `bash scripts/install.sh`"), "{text}");
        assert!(
            lines[2].contains("needs TensorRT-RTX (compute capability 8.9): this trtkit fits"),
            "{text}"
        );
        assert!(
            lines[3].contains("6.1") && lines[3].contains("CPU backends work"),
            "{text}"
        );
        let tensorrt = flavour_lines(&flavour_fit(Flavour::TensorRt, &gpus));
        assert!(
            tensorrt.contains(
                "this trtkit loads NVIDIA TensorRT 11 (the default build loads TensorRT-RTX)"
            ),
            "{tensorrt}"
        );
        assert!(
            tensorrt
                .contains("needs NVIDIA TensorRT 11 (compute capability 9.0): this trtkit fits"),
            "{tensorrt}"
        );
        assert!(
            tensorrt.contains(
                "needs TensorRT-RTX (compute capability 8.9), not NVIDIA TensorRT 11; fix:"
            ),
            "{tensorrt}"
        );
        let none = flavour_lines(&flavour_fit(Flavour::TensorRtRtx, &[]));
        assert_eq!(none.lines().count(), 1, "{none}");
    }
}
