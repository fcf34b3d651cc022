#!/usr/bin/env python3
"""CPU reference throughput: tract (trtkit's embedded backend) and ONNX Runtime inside trtkit
(trtkit's default CPU backend where ONNX Runtime is installed) beside ONNX Runtime from Python,
same model, same machine, one run.

    python3 scripts/cpu_throughput.py --trtkit target/release/trtkit --model resnet50.onnx

For each tract thread count it runs `trtkit compare MODEL MODEL --a-backend tract --a-threads T
--b-backend ort`
(so tract's outputs are also checked against ONNX Runtime's), then times ONNX Runtime from
Python with the same batch (one warm-up batch, then --batches timed batches). Prints one table:
images/s and ms/image per engine and thread count, and the ratio to ONNX Runtime with all
threads. Needs the `onnxruntime` and `numpy` Python packages.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def ort_images_per_s(model, batch, threads, batches):
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    x = np.random.default_rng(0).random((batch, 3, 224, 224), dtype=np.float32)
    sess.run(None, {name: x})
    start = time.perf_counter()
    for _ in range(batches):
        sess.run(None, {name: x})
    return batch * batches / (time.perf_counter() - start)


def tract_run(trtkit, model, batch, threads, batches, ort_threads):
    cmd = [
        trtkit, "compare", model, model,
        "--a-backend", "tract", "--a-threads", str(threads), "--b-backend", "ort", "--b-threads", str(ort_threads),
        "--batch", str(batch), "--num-inputs", str(batch * batches), "--json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        # Without a usable ONNX Runtime library, compare tract with itself.
        print(f"trtkit with --b-backend ort failed: {out.stderr.strip()}", file=sys.stderr)
        cmd[cmd.index("ort")] = "tract"
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trtkit", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count()])
    p.add_argument("--batches", type=int, default=3, help="timed batches per configuration")
    args = p.parse_args()
    all_threads = max(args.threads)

    rows = []
    for t in args.threads:
        ips = ort_images_per_s(args.model, args.batch, t, args.batches)
        rows.append(("onnxruntime (python)", t, ips, None))
    for t in args.threads:
        batches = args.batches if t > 1 else 1
        report = tract_run(args.trtkit, args.model, args.batch, t, batches, all_threads)
        a, b = report["sides"]
        out = report["outputs"][0]
        agree = f"equal {out['closeness']['equal_pct']:.2f}%, max abs err {out['closeness']['max_abs_err']:.2e}"
        if out.get("topk"):
            agree += f", top-1 agreement {out['topk']['top1_agreement_pct']:.2f}%"
        rows.append((a["backend"], t, a["samples_per_s"], f"vs {b['backend']}: {agree}"))
        rows.append((b["backend"] + " (in trtkit)", all_threads, b["samples_per_s"], None))

    anchor = next(r[2] for r in rows if r[0].startswith("onnxruntime") and r[1] == all_threads)
    print(f"model {args.model}, batch {args.batch}, {os.cpu_count()} cores")
    print(f"{'engine':<28} {'threads':>7} {'images/s':>9} {'ms/image':>9} {'vs ORT-' + str(all_threads):>9}")
    for name, t, ips, note in rows:
        print(f"{name:<28} {t:>7} {ips:>9.1f} {1000 / ips:>9.2f} {ips / anchor:>8.2f}x")
        if note:
            print(f"{'':<28} {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
