//! The report of `doctor`: what this machine offers trtkit, one line per fact.

use crate::backend::tract_kernels::KernelModel;
use crate::data::decode::JpegDecoder;
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
