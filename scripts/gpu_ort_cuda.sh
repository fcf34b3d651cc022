#!/usr/bin/env bash
# ONNX Runtime's CUDA provider through trtkit's harness, measured on a machine with an NVIDIA
# GPU, each figure side by side with its anchor in the same run. Run it from the repository root.
#
# Needs: a trtkit release binary ($TRTKIT; default target/release/trtkit, else trtkit on PATH),
# the GPU suite ($GPU_SUITE, default target/release/examples/gpu_suite), the onnxruntime-gpu
# 1.31.1 Python package (installed, or unpacked in a folder given as $ORT_PKG: the folder that
# holds `onnxruntime/`), PyTorch and torchvision (to export the models and for the eager anchor),
# and the CUDA 13 / cuDNN 9 libraries PyTorch's wheels or /usr/local/cuda bring. Work files go
# to $WORK (default /tmp/work), results to $OUT (default ./out).
#
#     STEPS="setup check runs anchors compare" bash scripts/gpu_ort_cuda.sh
#     STEPS="matrix" MATRIX_S=540 bash scripts/gpu_ort_cuda.sh   # again to finish missing cells
#
# setup:   exports ResNet-50 and MobileNetV3-Large (torchvision, random weights, dynamic batch)
#          and a DistilBERT-class token model to $W/models, and their FP16 rewrites.
# check:   `trtkit doctor`, `trtkit doctor --check`, and the GPU suite with ResNet-50.
# runs:    `trtkit run --backend ort --device cuda` for both CNNs in fp32 and fp16 at batch
#          1, 32, 256: plain, --cuda-graph and --streams 2, as JSON.
# anchors: ONNX Runtime's own Python I/O-binding loop on the same models and batches, right
#          after trtkit's plain run of each (twice, alternating); PyTorch eager at batch 256
#          beside trtkit with --no-transfers (its input stays on the GPU too), NCHW and NHWC.
# compare: ort-cuda against tract on the CPU (top-1 agreement) for both CNNs in fp32 and fp16.
# matrix:  the three models × fp32/fp16/int8 × batch 1/32/256 × ort-cuda, tract-cuda, ort-cpu.
set -u
export PYTHONUNBUFFERED=1
REPO=$(pwd)
if [ -n "${TRTKIT:-}" ]; then T=$(realpath "$TRTKIT")
elif [ -x "$REPO/target/release/trtkit" ]; then T=$REPO/target/release/trtkit
else T=$(command -v trtkit || true); fi
if [ -z "$T" ] || [ ! -x "$T" ]; then echo "gpu_ort_cuda: no trtkit binary (build it, or set TRTKIT)" >&2; exit 1; fi
SUITE=$(realpath "${GPU_SUITE:-$REPO/target/release/examples/gpu_suite}")
W=${WORK:-/tmp/work}
OUT=${OUT:-$REPO/out}
STEPS=${STEPS:-"setup check runs anchors compare"}
MATRIX_S=${MATRIX_S:-540}
mkdir -p "$W/models" "$OUT"
W=$(realpath "$W"); OUT=$(realpath "$OUT")
if [ -n "${ORT_PKG:-}" ]; then ORT_PKG=$(realpath "$ORT_PKG"); export PYTHONPATH=$ORT_PKG${PYTHONPATH:+:$PYTHONPATH}; fi
# The CUDA 13 and cuDNN 9 libraries, for the Python anchor (trtkit finds them itself).
SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')
for d in "$SITE/nvidia/cu13/lib" "$SITE/nvidia/cudnn/lib" /usr/local/cuda/lib64; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
step() { echo; echo "===== $* ($(date +%T))"; }
M=$W/models
CNNS="resnet50 mobilenet_v3_large"

for s in $STEPS; do case $s in
setup)
  step setup
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,power.limit --format=csv
  [ -f $M/resnet50.onnx ] || python3 scripts/export_torchvision.py $CNNS --out $M 2>&1 | tail -2
  [ -f $M/distilbert.onnx ] || python3 scripts/export_token_model.py --out $M/distilbert.onnx 2>&1 | tail -2
  for n in $CNNS; do
    [ -f $M/${n}_fp16.onnx ] || $T quantize $M/$n.onnx --fp16 -o $M/${n}_fp16.onnx | tail -1
  done
  ls -la $M
  ;;
check)
  step doctor
  $T doctor | tee $OUT/doctor.txt
  step "doctor --check"
  $T doctor --check | tee $OUT/doctor-check.txt; echo "doctor --check exit ${PIPESTATUS[0]}"
  step "GPU suite with ResNet-50 on ort-cuda"
  $SUITE --onnx $M/resnet50.onnx | tee $OUT/gpu-suite.txt
  ;;
runs)
  for n in $CNNS; do for p in "" _fp16; do
    for mode in plain graph streams2; do
      case $mode in plain) f="";; graph) f="--cuda-graph";; streams2) f="--streams 2";; esac
      step "run $n$p $mode"
      $T run $M/$n$p.onnx --backend ort --device cuda --batch-size 1,32,256 \
        --warmup 20 --duration 3 $f --json > $OUT/run-$n$p-$mode.json
      python3 - $OUT/run-$n$p-$mode.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for b in r["results"]:
    l = b["latency_ms"]
    print(f"b{b['batch']:<4} {b['throughput']:>9.1f} samples/s  model {l['compute']['mean']:.3f} ms  all {l['all']['mean']:.3f} ms  all>=model {l['all']['min'] >= l['compute']['min']}  process peak {((b['memory'] or {}).get('process_peak') or 0)/2**20:.0f} MiB")
PY
    done
  done; done
  ;;
anchors)
  for n in $CNNS; do for p in "" _fp16; do
    step "trtkit plain then ONNX Runtime's Python I/O-binding loop: $n$p"
    for round in 1 2; do
      # Like for like: the Python loop's inputs and outputs stay on the GPU, so --no-transfers.
      $T run $M/$n$p.onnx --backend ort --device cuda --no-transfers --batch-size 1,32,256 --warmup 20 --duration 3 --json \
        | python3 -c 'import json,sys; r=json.load(sys.stdin); [print("trtkit", b["batch"], round(b["throughput"],1)) for b in r["results"]]'
      python3 scripts/ort_iobinding_bench.py $M/$n$p.onnx --batch-sizes 1,32,256 --iterations 300 2>/dev/null \
        | python3 -c 'import json,sys; [print("ort-python", d["batch"], round(d["samples_per_s"],1)) for d in map(json.loads, sys.stdin)]'
    done
  done; done
  step "PyTorch eager, batch 256, channels_last, cudnn.benchmark"
  python3 scripts/torch_eager_bench.py $CNNS --precisions fp32,fp16 --batch-sizes 256 2>/dev/null | tee $OUT/torch.jsonl
  # Against eager PyTorch, whose input stays on the GPU: trtkit with --no-transfers too (and with
  # its copies, for the record), NCHW and NHWC convolutions.
  for n in $CNNS; do for p in "" _fp16; do for nhwc in "" --nhwc; do for tr in --no-transfers ""; do
    echo "trtkit $n$p b256 $nhwc $tr: $($T run $M/$n$p.onnx --backend ort --device cuda $nhwc $tr --batch-size 256 --warmup 10 --duration 3 --json | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["results"][0]["throughput"],1))')"
  done; done; done; done
  ;;
compare)
  for n in $CNNS; do for p in "" _fp16; do
    step "compare $n$p: ort-cuda against tract on the CPU"
    $T compare $M/$n$p.onnx $M/$n.onnx --a-backend ort --a-device cuda --num-samples 64 --batch-size 32 | tail -6
  done; done
  ;;
matrix)
  step "matrix (timeout $MATRIX_S s; run again to finish)"
  cd $W
  timeout $MATRIX_S $T bench --models $M/resnet50.onnx $M/mobilenet_v3_large.onnx $M/distilbert.onnx \
    --dim seq=128 --precisions fp32,fp16,int8 --batch-sizes 1,32,256 --targets ort-cuda,tract-cuda,ort-cpu \
    --calib-samples 32 --warmup 2 --duration 1 --cell-timeout ${CELL_TIMEOUT:-150} --name ort-matrix --results results
  echo "bench exit $?"
  $T report results/ort-matrix --markdown > $OUT/matrix.md
  cp results/ort-matrix/journal.jsonl $OUT/ 2>/dev/null
  (cd $W && tar czf $OUT/matrix-logs.tgz results/ort-matrix/logs) 2>/dev/null
  ;;
esac; done
ls -la $OUT
