#!/usr/bin/env bash
# The GPU reference (ONNX Runtime's CUDA provider through trtkit's harness) against PyTorch
# eager on the same card, in one run: the layouts and cuDNN settings side by side, and trtkit's
# defaults with the outputs' closeness to FP32 in NCHW. Run it from the repository root on a
# machine with an NVIDIA GPU, PyTorch and torchvision.
#
#     STEPS="setup sweep cudnn torch" bash scripts/gpu_reference_speed.sh   # what to default to
#     STEPS="setup defaults torch closeness" bash scripts/gpu_reference_speed.sh
#
# Needs: a trtkit release binary ($TRTKIT, else target/release/trtkit, else trtkit on PATH) and
# ONNX Runtime's GPU build where trtkit finds it (ORT_DYLIB_PATH). Work files go to $WORK
# (default /tmp/work), results to $OUT (default ./out).
#
# setup:     ResNet-50 and MobileNetV3-Large (torchvision, random weights) and a DistilBERT-class
#            model, with their FP16 rewrites (float32 I/O, and float16 I/O with --fp16-io).
# sweep:     both CNNs, fp32/fp16, batch 1/32/256, --layout-policy nchw and nhwc.
# cudnn:     both CNNs, fp32/fp16, batch 1/32/256: each layout and cuDNN setting of $VARIANTS
#            (`;`-separated, each a layout and flags) against the defaults.
# defaults:  every model, fp32/fp16/fp16-io, batch 1/32/256, no tuning flag.
# torch:     PyTorch eager (channels_last, cudnn.benchmark, .half() for fp16), same batches.
# closeness: trtkit's defaults on ort-cuda against FP32 in NCHW on ONNX Runtime's CPU build.
# fusion:    the DistilBERT-class model, fp32 and fp16, --transformer-fusion off and on with
#            --cuda-graph, at batch 32 and seq $SEQS, and batch 256 seq 128; PyTorch eager at the
#            same points; then the fused fp16 graph's closeness to the unfused FP32 graph.
# setup_split: set-up per part (open, prepare, first inference) of `run` for both CNNs in fp16 at
#            batch 256: first use (the layouts measured), kept, and each single layout; then
#            `validate` of ResNet-50 fp16 on $IMAGES (an image folder; skipped when unset), first
#            use and kept, with each slot's first inference.
# op_profile: the DistilBERT-class model's time per operator type (`run --op-profile` with
#            CUDA_LAUNCH_BLOCKING=1), fp16 and fp32, seq 128 and 512, fusion off and on.
#
# trtkit runs with --no-transfers: PyTorch's input stays on the GPU too. Each line gives the
# samples/s and the set-up (open, prepare, first inference: where cuDNN's search runs) of one point.
set -u
export PYTHONUNBUFFERED=1
REPO=$(pwd)
if [ -n "${TRTKIT:-}" ]; then T=$(realpath "$TRTKIT")
elif [ -x "$REPO/target/release/trtkit" ]; then T=$REPO/target/release/trtkit
else T=$(command -v trtkit || true); fi
if [ -z "$T" ] || [ ! -x "$T" ]; then echo "gpu_reference_speed: no trtkit binary (build it, or set TRTKIT)" >&2; exit 1; fi
W=${WORK:-/tmp/work}
OUT=${OUT:-$REPO/out}
STEPS=${STEPS:-"setup defaults torch closeness"}
BATCHES=${BATCHES:-1,32,256}
mkdir -p "$W/models" "$OUT"
W=$(realpath "$W"); OUT=$(realpath "$OUT"); M=$W/models
CNNS="resnet50 mobilenet_v3_large"
step() { echo; echo "===== $* ($(date +%T))"; }

# One `trtkit run` over $BATCHES; prints a line per batch: label, batch, samples/s, first
# inference (ms) and the process's wall time.
measure() {
  local label=$1; shift
  local t0; t0=$(date +%s%N)
  # shellcheck disable=SC2086
  "$T" run "$@" ${EXTRA:-} --backend ort --device cuda --no-transfers --batch-size "$BATCHES" \
    --warmup 10 --duration 2 --json > "$W/run.json" 2> "$W/run.err"
  local rc=$? t1; t1=$(date +%s%N)
  if [ $rc -ne 0 ]; then echo "$label: FAILED ($(tail -1 "$W/run.err"))"; return; fi
  python3 - "$W/run.json" "$label" "$(( (t1 - t0) / 1000000 ))" <<'PY' | tee -a "$OUT/points.txt"
import json, sys
r = json.load(open(sys.argv[1]))
for b in r["results"]:
    s = b.get("setup") or {}
    parts = " ".join(f"{k[:-3]} {s[k] / 1e3:5.2f}" for k in ("open_ms", "prepare_ms", "first_iteration_ms") if k in s)
    print(f"{sys.argv[2]:<50} b{b['batch']:<4} {b['throughput']:>9.1f}/s  set-up {s.get('total_ms', 0) / 1e3:5.2f} s ({parts})  process {int(sys.argv[3]) / 1e3:5.1f} s")
for n in r["notes"]:
    if n.startswith("ort-cuda: ") and "convolutions" in n:
        print("    " + n[n.index("convolutions"):n.index(", cuDNN:")])
PY
}

model_of() { case $2 in fp32) echo "$M/$1.onnx";; fp16) echo "$M/${1}_fp16.onnx";; fp16io) echo "$M/${1}_fp16io.onnx";; esac; }
shape_of() { [ "$1" = distilbert ] && echo "--dim seq=128"; }

for s in $STEPS; do case $s in
setup)
  step setup
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  [ -f "$M/resnet50.onnx" ] || python3 scripts/export_torchvision.py $CNNS --out "$M" 2>&1 | tail -1
  [ -f "$M/distilbert.onnx" ] || python3 scripts/export_token_model.py --out "$M/distilbert.onnx" 2>&1 | tail -1
  for n in $CNNS distilbert; do
    [ -f "$M/${n}_fp16.onnx" ] || "$T" quantize "$M/$n.onnx" --fp16 -o "$M/${n}_fp16.onnx" | tail -1
    [ -f "$M/${n}_fp16io.onnx" ] || "$T" quantize "$M/$n.onnx" --fp16 --fp16-io -o "$M/${n}_fp16io.onnx" | tail -1
  done
  ;;
sweep)
  step "layouts"
  for n in $CNNS; do for p in fp32 fp16; do for l in nchw nhwc; do
    measure "$n $p $l" "$(model_of $n $p)" --layout-policy $l
  done; done; done
  ;;
cudnn)
  step "cuDNN settings"
  IFS=';' read -r -a variants <<< "${VARIANTS:-nhwc --cudnn-search heuristic;nhwc --cudnn-search default;nhwc --cudnn-workspace limited;nhwc --cudnn-fuse on}"
  for n in $CNNS; do for p in ${PRECISIONS:-fp32 fp16}; do for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    measure "$n $p $v" "$(model_of $n $p)" --layout-policy $v
  done; done; done
  ;;
defaults)
  step "trtkit's defaults"
  for n in $CNNS distilbert; do for p in fp32 fp16 fp16io; do
    # shellcheck disable=SC2046
    measure "$n $p default" "$(model_of $n $p)" $(shape_of $n)
  done; done
  ;;
torch)
  step "PyTorch eager (channels_last, cudnn.benchmark)"
  python3 scripts/torch_eager_bench.py $CNNS distilbert --precisions fp32,fp16 --batch-sizes "$BATCHES" \
    --iterations 50 2>&1 >"$OUT/torch.jsonl" | tee -a "$OUT/points.txt"
  ;;
fusion)
  step "transformer fusion (DistilBERT-class, --cuda-graph) and PyTorch eager"
  for p in fp16 fp32; do
    python3 scripts/bench_transformer_fusion.py --trtkit "$T" --model "$(model_of distilbert $p)" \
      --batch-sizes 32 --seqs "${SEQS:-64,128,256,512}" --rounds ${ROUNDS:-1} --duration 2 \
      -- --device cuda --cuda-graph --no-transfers | tee -a "$OUT/points.txt"
    python3 scripts/bench_transformer_fusion.py --trtkit "$T" --model "$(model_of distilbert $p)" \
      --batch-sizes 256 --seqs 128 --rounds ${ROUNDS:-1} --duration 2 \
      -- --device cuda --cuda-graph --no-transfers | tee -a "$OUT/points.txt"
  done
  for seq in $(echo "${SEQS:-64,128,256,512}" | tr , ' '); do
    python3 scripts/torch_eager_bench.py distilbert --precisions fp32,fp16 --batch-sizes 32 --seq "$seq" \
      --iterations 50 2>&1 >/dev/null | tee -a "$OUT/points.txt"
  done
  python3 scripts/torch_eager_bench.py distilbert --precisions fp32,fp16 --batch-sizes 256 --seq 128 \
    --iterations 20 2>&1 >/dev/null | tee -a "$OUT/points.txt"
  # tract never fuses: the reference is the FP32 graph as exported.
  for p in fp32 fp16; do for seq in ${CLOSE_SEQS:-128}; do
    "$T" compare "$(model_of distilbert $p)" "$M/distilbert.onnx" --a-backend ort --a-device cuda \
      --b-backend tract --num-samples 32 --batch-size 32 --dim seq=$seq --json > "$W/c.json" 2> "$W/c.err" \
      || { echo "distilbert $p seq $seq: FAILED ($(tail -1 "$W/c.err"))"; continue; }
    python3 - "$W/c.json" "fused distilbert $p seq $seq vs FP32 unfused" <<'PY' | tee -a "$OUT/points.txt"
import json, sys
d = json.load(open(sys.argv[1]))
c = d["outputs"][0]["closeness"]
print(f"{sys.argv[2]:<44} cosine {c.get('cosine'):.7f}  max_abs {c.get('max_abs_err'):.3g}")
PY
  done; done
  ;;
setup_split)
  step "set-up per part (run: first use, kept, single layouts; validate)"
  # A cache of its own, so that "first use" is one.
  export TRTKIT_CACHE_DIR="$W/setup-split-cache"; rm -rf "$TRTKIT_CACHE_DIR"
  for n in $CNNS; do
    for v in "first use" "kept" "nhwc unfused:--layout-policy nhwc --cudnn-fuse off" "nchw unfused:--layout-policy nchw --cudnn-fuse off"; do
      # shellcheck disable=SC2046
      BATCHES=256 measure "$n fp16 ${v%%:*}" "$(model_of "$n" fp16)" $( [ "${v#*:}" != "$v" ] && echo "${v#*:}" )
    done
  done
  if [ -n "${IMAGES:-}" ]; then for round in "first use" kept kept; do
    "$T" validate "$(model_of resnet50 fp16)" --dataset "$IMAGES" --backend ort --device cuda --batch-size 256 \
      --warmup 3 --json -v > "$W/v.json" 2> "$W/v.err" || { echo "validate: FAILED ($(tail -1 "$W/v.err"))"; continue; }
    grep -o "GPU feed: .*" "$W/v.err" | tee -a "$OUT/points.txt"
    python3 - "$W/v.json" "validate resnet50 fp16 $round" <<'PY' | tee -a "$OUT/points.txt"
import json, sys
r = json.load(open(sys.argv[1])); s = r["time_split"]
print(f"{sys.argv[2]:<34} wall {r['wall_s']:.2f} s, set-up {s['setup_s']:.2f} s (first inference "
      f"{r.get('first_inference_ms', 0) / 1e3:.2f} s), waiting for images {s['wait_images_s']:.2f} s, "
      f"model {s['model_s']:.2f} s, steady {r['steady_images_per_s']:.0f}/s; {r['data_path']}")
PY
  done; fi
  ;;
op_profile)
  step "time per operator type (DistilBERT-class, CUDA_LAUNCH_BLOCKING=1)"
  for seq in 128 512; do for p in fp16 fp32; do for f in off on; do
    CUDA_LAUNCH_BLOCKING=1 "$T" run "$(model_of distilbert $p)" --backend ort --device cuda --dim seq=$seq \
      --batch-size 32 --warmup 5 --iterations 20 --no-transfers --op-profile --transformer-fusion $f 2>&1 \
      | grep -o "op profile.*" | sed "s/^/distilbert $p seq $seq fusion $f: /" | tee -a "$OUT/points.txt"
  done; done; done
  ;;
closeness)
  step "closeness of trtkit's defaults on ort-cuda to FP32 in NCHW on the CPU"
  for n in $CNNS distilbert; do for p in fp32 fp16 fp16io; do
    # shellcheck disable=SC2046
    "$T" compare "$(model_of $n $p)" "$M/$n.onnx" --a-backend ort --a-device cuda --b-backend ort --b-device cpu ${EXTRA:-} \
      --num-samples 64 --batch-size 32 $(shape_of $n) --json > "$W/c.json" 2> "$W/c.err" \
      || { echo "$n $p: FAILED ($(tail -1 "$W/c.err"))"; continue; }
    python3 - "$W/c.json" "$n $p" <<'PY' | tee -a "$OUT/points.txt"
import json, sys
d = json.load(open(sys.argv[1]))
o = d["outputs"][0]; c = o["closeness"]
top1 = (o.get("topk") or {}).get("top1_agreement_pct")
print(f"{sys.argv[2]:<28} cosine {c.get('cosine'):.7f}  max_abs {c.get('max_abs_err'):.3g}  top1 {top1}")
PY
  done; done
  ;;
esac; done
