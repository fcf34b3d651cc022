#!/usr/bin/env bash
# The benchmark matrix of issue 12 on the GPU machine, resumable across device calls.
#
# Here, first (the machine has no cargo and receives 64 MiB a call):
#
#     cargo build --release --locked --bin trtkit
#     bash scripts/pack_tensorrt_rtx.sh
#     mkdir -p .carry/bin && strip -o /tmp/trtkit target/release/trtkit && xz -T2 -6 -c /tmp/trtkit > .carry/bin/trtkit.xz
#
# Then device calls back to back (the machine stays warm between them, and keeps /tmp):
#
#     call 1, carry [".carry/trt-a"]:               cp .carry/trt-a/part.aa /tmp/part.aa
#     call 2, carry [".carry/trt-b", ".carry/bin"]: STEPS="setup nvml oom matrix" bash scripts/gpu_bench.sh
#     call 3.., same carry:                         STEPS="matrix" bash scripts/gpu_bench.sh
#
# setup: unpacks TensorRT-RTX and trtkit, exports torchvision ResNet-50, MobileNetV3-Large and
#        ResNet-18 (random weights, dynamic batch) to /tmp/work/models, and runs each once on
#        tract-cuda (fp32, fp16) so its kernels are compiled and cached before cells are timed.
# nvml:  ResNet-50 fp32 on tract-cuda at batch 64, NVML sampling at 20 Hz and off, three runs each,
#        interleaved (the cost of monitoring).
# oom:   ResNet-50 fp32 on tract-cuda at batch 16384, which does not fit: recorded as OOM.
# matrix: the three models × fp32/fp16/int8 × batch 1,16,32,64,256 × tract-cuda, tract-cpu,
#        ort-cpu, trt, compared with FP32 on ort-cpu, under `timeout $MATRIX_S` (the same
#        command again finishes the missing cells).
# Journals and logs are packed into $OUT/results.tgz after every step.
set -u
export PYTHONUNBUFFERED=1
REPO=$(pwd)
W=/tmp/work
T=/tmp/trtkit
STEPS=${STEPS:-"setup nvml oom matrix"}
MATRIX_S=${MATRIX_S:-420}
mkdir -p $W
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d $d ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
export TRTKIT_TENSORRT_DIR=/tmp/trtrtx
export LD_LIBRARY_PATH=/tmp/trtrtx:${LD_LIBRARY_PATH:-}
step() { echo; echo "===== $* ($(date +%T))"; }
copy_out() {
  # One file comes back better than many (a call returns a limited number of files).
  (cd $W && find results -name 'journal*.jsonl' -o -name '*.log' | tar czf $OUT/results.tgz -T -) 2>/dev/null
}
# The binary: decompressed from what this call carried (a newer build replaces the old one).
python3 - <<'PY'
import lzma, shutil, os
with lzma.open(".carry/bin/trtkit.xz") as f, open("/tmp/trtkit", "wb") as o:
    shutil.copyfileobj(f, o)
os.chmod("/tmp/trtkit", 0o755)
PY
cd $W
# Journals carried from an earlier machine (.carry/resume/<name>/journal.jsonl) resume there.
if [ -d $REPO/.carry/resume ]; then
  for j in $REPO/.carry/resume/*/journal.jsonl; do
    n=$(basename $(dirname $j)); mkdir -p results/$n
    [ -f results/$n/journal.jsonl ] || cp $j results/$n/journal.jsonl
  done
fi
for s in $STEPS; do case $s in
setup)
  step setup
  (cd $REPO && bash scripts/unpack_tensorrt_rtx.sh > /dev/null) || echo "TensorRT-RTX not unpacked"
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,power.limit --format=csv
  nproc
  [ -f models/resnet18.onnx ] || python3 $REPO/scripts/export_torchvision.py resnet50 mobilenet_v3_large resnet18 --out models 2>&1 | tail -3
  ls -la models
  $T doctor | head -30
  step "warm tract-cuda's kernel cache (compiled at run time once per machine, then on disk)"
  $T bench --models models/resnet50.onnx models/mobilenet_v3_large.onnx models/resnet18.onnx \
    --precisions fp32,fp16 --batch-sizes 1 --targets tract-cuda --warmup 0 --iterations 1 \
    --cell-timeout 240 --name warm --results results
  copy_out
  ;;
nvml)
  # Interleaved pairs, so drift of clocks and temperature hits both sides alike.
  NM=${NVML_MODEL:-resnet18}; NB=${NVML_BATCH:-1}; NP=${NVML_PAIRS:-3}
  step "nvml: $NM fp32 b$NB on tract-cuda, sampling at 20 Hz vs off, $NP pairs"
  for i in $(seq $NP); do for hz in 20 0; do
    $T bench --models models/$NM.onnx --precisions fp32 --batch-sizes $NB --targets tract-cuda \
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
  $T bench --models models/resnet50.onnx --precisions fp32 --batch-sizes 16384 --targets tract-cuda \
    --warmup 0 --iterations 1 --cell-timeout 300 --name oom --results results
  copy_out
  ;;
matrix)
  step "matrix (timeout $MATRIX_S s; run again to finish)"
  timeout $MATRIX_S $T bench --models models/resnet50.onnx models/mobilenet_v3_large.onnx models/resnet18.onnx \
    --precisions fp32,fp16,int8 --batch-sizes 1,16,32,64,256 --targets tract-cuda,tract-cpu,ort-cpu,trt \
    --compare --reference ort-cpu --compare-samples 8 --calib-samples 64 \
    --warmup 2 --duration 1 --cell-timeout ${CELL_TIMEOUT:-25} --name matrix --results results
  echo "bench exit $?"
  copy_out
  ;;
esac; done
ls -la $OUT
