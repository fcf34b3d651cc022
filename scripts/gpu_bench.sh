#!/usr/bin/env bash
# The GPU benchmark matrix behind the README's figures, on a machine with an NVIDIA GPU:
# torchvision ResNet-50, MobileNetV3-Large and ResNet-18 through `trtkit bench` on tract-cuda,
# tract-cpu, ort-cpu and TensorRT-RTX, plus the cost of NVML sampling and an out-of-memory cell.
#
#     STEPS="setup nvml oom matrix" bash scripts/gpu_bench.sh
#     STEPS="matrix" bash scripts/gpu_bench.sh        # again, to finish the cells still missing
#
# Needs: a trtkit release binary (TRTKIT; default target/release/trtkit, else trtkit on PATH);
# Python with PyTorch and torchvision (to export the models); TensorRT-RTX for the trt cells,
# from TRTKIT_TENSORRT_DIR if set, else unpacked with scripts/unpack_tensorrt_rtx.sh from a pack
# of scripts/pack_tensorrt_rtx.sh in TRTRTX_PACK_DIR (default dist/tensorrt-rtx) if there is
# one, else wherever trtkit finds it itself (`trtkit doctor` says where).
#
# setup: exports the three models (random weights, dynamic batch) to $WORK/models, and runs each
#        once on tract-cuda (fp32, fp16) so its kernels are compiled and cached before cells are
#        timed.
# nvml:  $NVML_MODEL (default resnet18) fp32 on tract-cuda at batch $NVML_BATCH (default 1),
#        NVML sampling at 20 Hz and off, $NVML_PAIRS (default 3) runs each, interleaved (the
#        cost of monitoring).
# oom:   ResNet-50 fp32 on tract-cuda at batch 16384, which does not fit: recorded as OOM.
# matrix: the three models × fp32/fp16/int8 × batch 1,16,32,64,256 × tract-cuda, tract-cpu,
#        ort-cpu, trt, compared with FP32 on ort-cpu, under `timeout $MATRIX_S` (default 420 s).
#        `bench` journals every cell in $WORK/results, so the same command again measures only
#        the cells still missing.
#
# Environment: STEPS, TRTKIT, TRTKIT_TENSORRT_DIR, TRTRTX_PACK_DIR (above), WORK (default
# /tmp/work), OUT (default $WORK/out: receives results.tgz, every journal and log, after every
# step), MATRIX_S, CELL_TIMEOUT (per matrix cell, default 25 s), NVML_MODEL, NVML_BATCH,
# NVML_PAIRS, RESUME_DIR (journals of an earlier run, RESUME_DIR/<name>/journal.jsonl: copied to
# $WORK/results/<name>/ where that run has none yet, so `bench` resumes them).
set -u
export PYTHONUNBUFFERED=1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
W=${WORK:-/tmp/work}
OUT=${OUT:-$W/out}
STEPS=${STEPS:-"setup nvml oom matrix"}
MATRIX_S=${MATRIX_S:-420}
mkdir -p "$W" "$OUT"
W=$(realpath "$W"); OUT=$(realpath "$OUT")
RESUME=${RESUME_DIR:+$(realpath "$RESUME_DIR")}
if [ -n "${TRTKIT:-}" ]; then T=$(realpath "$TRTKIT")
elif [ -x "$REPO/target/release/trtkit" ]; then T=$REPO/target/release/trtkit
else T=$(command -v trtkit || true); fi
if [ -z "$T" ] || [ ! -x "$T" ]; then echo "gpu_bench: no trtkit binary (build it, or set TRTKIT)" >&2; exit 1; fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d $d ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
PACK=${TRTRTX_PACK_DIR:-$REPO/dist/tensorrt-rtx}
if [ -n "${TRTKIT_TENSORRT_DIR:-}" ]; then
  export LD_LIBRARY_PATH=$TRTKIT_TENSORRT_DIR:${LD_LIBRARY_PATH:-}
elif [ -f "$PACK/SHA256SUMS" ]; then
  if exports=$(bash "$REPO/scripts/unpack_tensorrt_rtx.sh" "$PACK"); then eval "$exports"
  else echo "TensorRT-RTX not unpacked from $PACK"; fi
fi
step() { echo; echo "===== $* ($(date +%T))"; }
copy_out() {
  # Every journal and log in one archive, to copy off the machine in one piece.
  (cd "$W" && find results -name 'journal*.jsonl' -o -name '*.log' | tar czf "$OUT/results.tgz" -T -) 2>/dev/null
}
cd "$W" || exit 1
if [ -n "$RESUME" ]; then
  for j in "$RESUME"/*/journal.jsonl; do
    [ -f "$j" ] || continue
    n=$(basename "$(dirname "$j")"); mkdir -p "results/$n"
    [ -f "results/$n/journal.jsonl" ] || cp "$j" "results/$n/journal.jsonl"
  done
fi
for s in $STEPS; do case $s in
setup)
  step setup
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,power.limit --format=csv
  nproc
  [ -f models/resnet18.onnx ] || python3 "$REPO/scripts/export_torchvision.py" resnet50 mobilenet_v3_large resnet18 --out models 2>&1 | tail -3
  ls -la models
  "$T" doctor | head -30
  step "warm tract-cuda's kernel cache (compiled at run time once per machine, then on disk)"
  "$T" bench --models models/resnet50.onnx models/mobilenet_v3_large.onnx models/resnet18.onnx \
    --precisions fp32,fp16 --batch-sizes 1 --targets tract-cuda --warmup 0 --iterations 1 \
    --cell-timeout 240 --name warm --results results
  copy_out
  ;;
nvml)
  # Interleaved pairs, so drift of clocks and temperature hits both sides alike.
  NM=${NVML_MODEL:-resnet18}; NB=${NVML_BATCH:-1}; NP=${NVML_PAIRS:-3}
  step "nvml: $NM fp32 b$NB on tract-cuda, sampling at 20 Hz vs off, $NP pairs"
  for i in $(seq $NP); do for hz in 20 0; do
    "$T" bench --models models/$NM.onnx --precisions fp32 --batch-sizes $NB --targets tract-cuda \
      --warmup 20 --duration 5 --nvml-hz $hz --name nvml-$NM-b$NB-$hz-$i --results results --json > /dev/null
    python3 - results/nvml-$NM-b$NB-$hz-$i/journal.jsonl $hz $i <<'PY'
import json, sys
for l in open(sys.argv[1]):
    m = json.loads(l)["metrics"] or {}
    print(f"hz={sys.argv[2]:>2} pair={sys.argv[3]} samples/s {m.get('samples_per_s', 0):.2f} iterations {m.get('iterations')} nvml readings {(m.get('power') or {}).get('samples')}")
PY
  done; done
  copy_out
  ;;
oom)
  step "oom: batch 16384 on tract-cuda"
  "$T" bench --models models/resnet50.onnx --precisions fp32 --batch-sizes 16384 --targets tract-cuda \
    --warmup 0 --iterations 1 --cell-timeout 300 --name oom --results results
  copy_out
  ;;
matrix)
  step "matrix (timeout $MATRIX_S s; run again to finish)"
  timeout $MATRIX_S "$T" bench --models models/resnet50.onnx models/mobilenet_v3_large.onnx models/resnet18.onnx \
    --precisions fp32,fp16,int8 --batch-sizes 1,16,32,64,256 --targets tract-cuda,tract-cpu,ort-cpu,trt \
    --compare --reference ort-cpu --compare-samples 8 --calib-samples 64 \
    --warmup 2 --duration 1 --cell-timeout ${CELL_TIMEOUT:-25} --name matrix --results results
  echo "bench exit $?"
  copy_out
  ;;
esac; done
ls -la "$OUT"
