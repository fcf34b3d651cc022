#!/usr/bin/env bash
# Sets up trtkit on a fresh Debian/Ubuntu x86-64 machine: the build tools its dependencies need
# (libclang for the TensorRT-RTX bindings, nasm for libjpeg-turbo's SIMD), the run-time
# libraries it loads (TensorRT-RTX, ONNX Runtime) from PyPI, and the trtkit binary itself.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
command -v nasm >/dev/null || need+=(nasm)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

python3 -m pip install -q tensorrt-rtx-cu13-libs==1.7.1.116 onnxruntime==1.28.0
cargo install --locked --path .
echo "trtkit installed: $(command -v trtkit || echo "$HOME/.cargo/bin/trtkit")"
trtkit doctor || true
