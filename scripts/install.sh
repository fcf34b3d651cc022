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

# ONNX Runtime: the GPU build (with the CUDA 13 runtime, cuBLAS and cuDNN 9 wheels its CUDA
# provider loads) where an NVIDIA driver is present, the CPU build elsewhere. The two install the
# same `onnxruntime` module, so the other one is removed first.
if [ -e /proc/driver/nvidia/version ] || command -v nvidia-smi >/dev/null 2>&1; then
  python3 -m pip uninstall -q -y onnxruntime 2>/dev/null || true
  python3 -m pip install -q tensorrt-rtx-cu13-libs==1.7.1.116 'onnxruntime-gpu[cuda,cudnn]==1.31.1' 'nvidia-cublas~=13.0'
else
  python3 -m pip uninstall -q -y onnxruntime-gpu 2>/dev/null || true
  python3 -m pip install -q tensorrt-rtx-cu13-libs==1.7.1.116 onnxruntime==1.31.1
fi
cargo install --locked --path .
echo "trtkit installed: $(command -v trtkit || echo "$HOME/.cargo/bin/trtkit")"
trtkit doctor || true
