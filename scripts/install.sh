#!/usr/bin/env bash
# Sets up trtkit on a fresh Debian/Ubuntu x86-64 machine: the build tools its dependencies need
# (libclang for the TensorRT bindings, nasm for libjpeg-turbo's SIMD), the run-time libraries it
# loads (ONNX Runtime, and the TensorRT that runs engines on GPU 0) from PyPI, and the trtkit
# binary itself. Which TensorRT is asked of the freshly built binary
# (`trtkit doctor --tensorrt-flavour`, by GPU 0's compute capability):
#   tensorrt-rtx (8.0, 8.6, 8.9, 12.x) or none (no GPU): TensorRT-RTX and the default build;
#   tensorrt (7.5, 9.0 H100/H200, 10.x B200, ...): NVIDIA's TensorRT 11 (from NVIDIA's own index,
#   pypi.nvidia.com) and trtkit rebuilt with `--features tensorrt`.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
command -v nasm >/dev/null || need+=(nasm)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Both builds share one target folder, so a second one (with --features tensorrt) recompiles
# only trtkit and its TensorRT bindings.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo install --locked --path .
trtkit="${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin/trtkit"

gpu=false
if [ -e /proc/driver/nvidia/version ] || command -v nvidia-smi >/dev/null 2>&1; then
  gpu=true
fi
flavour=none
if $gpu; then
  flavour="$("$trtkit" doctor --tensorrt-flavour)" || flavour=none
fi

# ONNX Runtime: the GPU build (with the CUDA 13 runtime, cuBLAS and cuDNN 9 wheels its CUDA
# provider loads) where an NVIDIA driver is present, the CPU build elsewhere. The two install the
# same `onnxruntime` module, so the other one is removed first.
if $gpu; then
  python3 -m pip uninstall -q -y onnxruntime 2>/dev/null || true
  python3 -m pip install -q 'onnxruntime-gpu[cuda,cudnn]==1.31.1' 'nvidia-cublas~=13.0'
else
  python3 -m pip uninstall -q -y onnxruntime-gpu 2>/dev/null || true
  python3 -m pip install -q onnxruntime==1.31.1
fi

if [ "$flavour" = tensorrt ]; then
  echo "GPU 0 runs engines with NVIDIA TensorRT 11, not TensorRT-RTX: installing tensorrt-cu13-libs and trtkit built with --features tensorrt"
  # PyPI holds only a placeholder of this wheel that downloads the real one from NVIDIA's index.
  if [ -e "${TRTKIT_TENSORRT_DIR:-/nonexistent}/libnvinfer.so.11" ]; then
    echo "using TensorRT 11 from TRTKIT_TENSORRT_DIR=$TRTKIT_TENSORRT_DIR"
  else
    log="$(mktemp)"
    if python3 -m pip install -q --extra-index-url https://pypi.nvidia.com 'tensorrt-cu13-libs>=11.4,<12' >"$log" 2>&1; then
      rm -f "$log"
    else
      echo "tensorrt-cu13-libs could not be installed (pip's output: $log): NVIDIA's index https://pypi.nvidia.com must be reachable, or set TRTKIT_TENSORRT_DIR to a folder holding libnvinfer.so.11; ONNX Runtime works meanwhile" >&2
    fi
  fi
  cargo install --locked --path . --features tensorrt
else
  python3 -m pip install -q tensorrt-rtx-cu13-libs==1.7.1.116
fi

echo "trtkit installed: $trtkit"
"$trtkit" doctor || true
