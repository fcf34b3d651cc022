#!/usr/bin/env bash
# Checks every engine command of trtkit on a machine with an NVIDIA GPU, in one run: `trtkit
# doctor`, the GPU suite (examples/gpu_suite.rs, its engine section included), then on
# torchvision ResNet-50 (random weights) its FP16 engine build and run, run --cuda-graph
# --streams 2, run --json, compare, validate, inspect --layers, a truncated engine with and
# without its sidecar, and --device-id out of range. Prints each command's output and exit code.
#
#     cargo build --release --locked --bin trtkit --example gpu_suite
#     bash scripts/gpu_engine_check.sh 2>&1 | tee log.txt
#
# Needs: trtkit (TRTKIT; default target/release/trtkit, else trtkit on PATH), the GPU suite
# (GPU_SUITE; default target/release/examples/gpu_suite), libnvrtc (from /usr/local/cuda or
# LD_LIBRARY_PATH), Python with PyTorch, torchvision and Pillow, and TensorRT-RTX: from
# TRTKIT_TENSORRT_DIR if set, else unpacked with scripts/unpack_tensorrt_rtx.sh from a pack of
# scripts/pack_tensorrt_rtx.sh in TRTRTX_PACK_DIR (default dist/tensorrt-rtx) if there is one,
# else wherever trtkit finds it itself.
#
# Environment: TRTKIT, GPU_SUITE, TRTKIT_TENSORRT_DIR, TRTRTX_PACK_DIR (above), WORK (default
# /tmp/work: models, engines, images), OUT (default $WORK/out: doctor.json, gpu_suite.txt).
set -u
export PYTHONUNBUFFERED=1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
W=${WORK:-/tmp/work}
OUT=${OUT:-$W/out}
mkdir -p "$W" "$OUT"
W=$(realpath "$W"); OUT=$(realpath "$OUT")
if [ -n "${TRTKIT:-}" ]; then T=$(realpath "$TRTKIT")
elif [ -x "$REPO/target/release/trtkit" ]; then T=$REPO/target/release/trtkit
else T=$(command -v trtkit || true); fi
if [ -z "$T" ] || [ ! -x "$T" ]; then echo "gpu_engine_check: no trtkit binary (build it, or set TRTKIT)" >&2; exit 1; fi
SUITE=$(realpath "${GPU_SUITE:-$REPO/target/release/examples/gpu_suite}")
[ -x "$SUITE" ] || { echo "gpu_engine_check: no GPU suite at $SUITE (build it, or set GPU_SUITE)" >&2; exit 1; }
PACK=${TRTRTX_PACK_DIR:-$REPO/dist/tensorrt-rtx}
if [ -z "${TRTKIT_TENSORRT_DIR:-}" ] && [ -f "$PACK/SHA256SUMS" ]; then
  exports=$(bash "$REPO/scripts/unpack_tensorrt_rtx.sh" "$PACK") || exit 1
  eval "$exports"
fi
SUITE_ARGS=()
if [ -n "${TRTKIT_TENSORRT_DIR:-}" ]; then
  export LD_LIBRARY_PATH=$TRTKIT_TENSORRT_DIR:${LD_LIBRARY_PATH:-}
  SUITE_ARGS=(--tensorrt-dir "$TRTKIT_TENSORRT_DIR")
fi
# libnvrtc, which the GPU suite compiles its kernels with.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d $d ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
cd "$W" || exit 1
step() { echo; echo "===== $*"; }
step nvidia-smi; nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
step "trtkit doctor"; "$T" doctor; echo "exit $?"; "$T" doctor --json > "$OUT/doctor.json"
step "gpu_suite"; timeout 300 "$SUITE" "${SUITE_ARGS[@]}" 2>&1 | tee "$OUT/gpu_suite.txt"; echo "exit ${PIPESTATUS[0]}"
step "export resnet50"; python3 "$REPO/scripts/export_torchvision.py" resnet50 --out models 2>&1 | tail -2
step "trtkit build --fp16"; "$T" build models/resnet50.onnx --fp16 --input-shape -1 3 224 224; echo "exit $?"
E=$(ls engines/*.engine | head -1)
step "trtkit run"; "$T" run $E --batch-size 1,16,32,64; echo "exit $?"
step "trtkit run --cuda-graph --streams 2"; "$T" run $E --cuda-graph --streams 2; echo "exit $?"
step "trtkit run --json"; "$T" run $E --json; echo "exit $?"
step "trtkit compare"; "$T" compare $E models/resnet50.onnx --num-samples 8; echo "exit $?"
python3 - <<'PY'
import os
from PIL import Image
for c, rgb in [("a", (200, 30, 30)), ("b", (30, 200, 30))]:
    os.makedirs(f"val/{c}", exist_ok=True)
    Image.new("RGB", (300, 260), rgb).save(f"val/{c}/x.jpg")
PY
step "trtkit validate"; "$T" validate $E --dataset val; echo "exit $?"
step "trtkit inspect --layers"; "$T" inspect $E --layers | tail -4; echo "exit $?"
step "truncated engine"; head -c 100000 $E > t.engine; cp $E.json t.engine.json; "$T" run t.engine; echo "exit $?"
step "truncated engine, no sidecar"; rm t.engine.json; "$T" run t.engine; echo "exit $?"
step "--device-id 3"; "$T" run $E --device-id 3; echo "exit $?"
step "RUST_LOG=debug run (TensorRT-RTX's own log)"; RUST_LOG=trtkit=debug "$T" run $E 2>&1 | grep -i "tensorrt" | head -8
ls -la engines
