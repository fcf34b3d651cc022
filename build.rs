//! Build script: records the git commit the binary was built from, so every report and cache
//! written by trtkit can say exactly which trtkit produced it; and whether the JPEG decoder
//! (libjpeg-turbo, built by `mozjpeg-sys`) has its SIMD code, which it has only when `nasm`
//! was there at build time, so that `doctor` can say so.

fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TRTKIT_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo:rerun-if-env-changed=DEP_JPEG_INCLUDE");
    println!("cargo:rustc-env=TRTKIT_JPEG_SIMD={}", jpeg_simd());
}

/// `yes` when the jconfig.h that mozjpeg-sys generated (in one of the folders of its
/// `cargo:include`, handed to us as `DEP_JPEG_INCLUDE`) defines `WITH_SIMD`, `no` when it
/// does not, `unknown` when it cannot be read.
fn jpeg_simd() -> &'static str {
    let Some(dirs) = std::env::var_os("DEP_JPEG_INCLUDE") else {
        return "unknown";
    };
    for dir in std::env::split_paths(&dirs) {
        if let Ok(text) = std::fs::read_to_string(dir.join("jconfig.h")) {
            return if text.lines().any(|l| l.trim() == "#define WITH_SIMD 1") {
                "yes"
            } else {
                "no"
            };
        }
    }
    "unknown"
}
