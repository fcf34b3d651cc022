#!/usr/bin/env bash
# The engine checks of issue 11 on the GPU machine, in one device call.
#
# Here, first: build and pack what travels (the machine has no cargo and receives 64 MiB a call):
#
#     cargo build --release --locked --bin trtkit --example gpu_suite
#     bash scripts/pack_tensorrt_rtx.sh
#     mkdir -p .carry/bin && for b in target/release/trtkit target/release/examples/gpu_suite; do
#         strip -o /tmp/$(basename $b) $b && xz -T2 -6 -c /tmp/$(basename $b) > .carry/bin/$(basename $b).xz; done
#
# Then two device calls back to back (the machine stays warm 30 s between them):
#
#     call 1, carry [".carry/trt-a"]:               cp .carry/trt-a/part.aa /tmp/part.aa
#     call 2, carry [".carry/trt-b", ".carry/bin"]: bash scripts/gpu_engine_check.sh 2>&1 | tee $OUT/log.txt
#
# It unpacks TensorRT-RTX and the binaries, then runs `trtkit doctor`, the GPU suite (its engine
# section included), exports torchvision ResNet-50 (random weights), builds its FP16 engine, and
# runs every engine command (run, run --cuda-graph --streams 2, run --json, compare, validate,
# inspect --layers, a truncated engine with and without its sidecar, --device-id out of range).
set -u
export PYTHONUNBUFFERED=1
REPO=$(pwd)
eval "$(bash scripts/unpack_tensorrt_rtx.sh)" || exit 1
python3 - <<'PY'
import lzma, shutil, os
for n in ["trtkit", "gpu_suite"]:
    with lzma.open(f".carry/bin/{n}.xz") as f, open(f"/tmp/{n}", "wb") as o:
        shutil.copyfileobj(f, o)
    os.chmod(f"/tmp/{n}", 0o755)
PY
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d $d ] && export LD_LIBRARY_PATH=$d:$LD_LIBRARY_PATH
done
T=/tmp/trtkit
W=/tmp/work; mkdir -p $W; cd $W
step() { echo; echo "===== $*"; }
step nvidia-smi; nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
step "trtkit doctor"; $T doctor; echo "exit $?"; $T doctor --json > $OUT/doctor.json
step "gpu_suite"; timeout 300 /tmp/gpu_suite --tensorrt-dir $TRTKIT_TENSORRT_DIR 2>&1 | tee $OUT/gpu_suite.txt; echo "exit ${PIPESTATUS[0]}"
step "export resnet50"; python3 $REPO/scripts/export_torchvision.py resnet50 --out models 2>&1 | tail -2
step "trtkit build --fp16"; $T build models/resnet50.onnx --fp16 --input-shape -1 3 224 224; echo "exit $?"
E=$(ls engines/*.engine | head -1)
step "trtkit run"; $T run $E --batch-size 1,16,32,64; echo "exit $?"
step "trtkit run --cuda-graph --streams 2"; $T run $E --cuda-graph --streams 2; echo "exit $?"
step "trtkit run --json"; $T run $E --json; echo "exit $?"
step "trtkit compare"; $T compare $E models/resnet50.onnx --num-samples 8; echo "exit $?"
python3 - <<'PY'
import os
from PIL import Image
for c, rgb in [("a", (200, 30, 30)), ("b", (30, 200, 30))]:
    os.makedirs(f"val/{c}", exist_ok=True)
    Image.new("RGB", (300, 260), rgb).save(f"val/{c}/x.jpg")
PY
step "trtkit validate"; $T validate $E --dataset val; echo "exit $?"
step "trtkit inspect --layers"; $T inspect $E --layers | tail -4; echo "exit $?"
step "truncated engine"; head -c 100000 $E > t.engine; cp $E.json t.engine.json; $T run t.engine; echo "exit $?"
step "truncated engine, no sidecar"; rm t.engine.json; $T run t.engine; echo "exit $?"
step "--device-id 3"; $T run $E --device-id 3; echo "exit $?"
step "RUST_LOG=debug run (TensorRT-RTX's own log)"; RUST_LOG=trtkit=debug $T run $E 2>&1 | grep -i "tensorrt" | head -8
ls -la engines
