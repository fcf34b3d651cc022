#!/usr/bin/env python3
"""How `trtkit validate` scales with the loader's threads: the same command at 1 thread and at N,
alternating, in one run.

Use a model that costs next to nothing (GlobalAveragePool -> MatMul, written by --make-trivial),
so that the loader bounds the run and the figures are the data path's: for each thread count it
prints validate's images/s over the wall, its steady images/s (after the warm-up batches) and the
loader's own rate, then the N/1 ratios of the medians.

    python3 scripts/validate_threads.py --trtkit target/release/trtkit --make-trivial /tmp/trivial.onnx \\
        --dataset /tmp/images --threads 1,2 --rounds 3 -- --backend ort --batch-size 64

Arguments after `--` go to `trtkit validate` as they are. Needs the `onnx` package only for
--make-trivial.

With --run LABEL=COMMAND (repeatable) it instead compares whole commands, alternating, each
with rayon's default pool: two builds of trtkit, or one pinned to a core with taskset. The
first --run is the base of the ratios, and each run's CPU split (`cpu_split` in the JSON, where
the build has it) is printed:

    python3 scripts/validate_threads.py --model /tmp/trivial.onnx --dataset /tmp/images --rounds 3 \
        --run "new=target/release/trtkit" --run "old=/tmp/trtkit-old" \
        --run "new-1core=taskset -c 0 target/release/trtkit" -- --backend ort --batch-size 64
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys


def make_trivial(path, size):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.random.RandomState(0).rand(3, 1000).astype(np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("GlobalAveragePool", ["x"], ["pooled"]),
            helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
            helper.make_node("MatMul", ["flat", "w"], ["scores"]),
        ],
        "trivial",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, size, size])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", 1000])],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # ONNX Runtime 1.31 refuses IR 14
    onnx.save(model, path)


def one_run(trtkit, model, dataset, threads, extra):
    """One validate run: `trtkit` a path (rayon's pool set to `threads`) or, with `threads`
    None, a command line (rayon's default pool)."""
    env = dict(os.environ)
    if threads is None:
        prefix = shlex.split(trtkit)
        env.pop("RAYON_NUM_THREADS", None)
    else:
        prefix = [trtkit]
        env["RAYON_NUM_THREADS"] = str(threads)
    cmd = [*prefix, "validate", model, "--dataset", dataset, "--json", *extra]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    r = json.loads(out.stdout)
    return {
        "threads": threads,
        "images": r["images"],
        "images_per_s": r["images_per_s"],
        "steady_images_per_s": r.get("steady_images_per_s"),
        "loader_images_per_s": (r.get("loader") or {}).get("images_per_s"),
        "time_split": r.get("time_split"),
        "cpu_split": r.get("cpu_split"),
    }


def compare_runs(args, model):
    """--run mode: each labelled command once per round, alternating; medians and ratios to the
    first."""
    runs = [r.split("=", 1) for r in args.run]
    got = {label: [] for label, _ in runs}
    for i in range(args.rounds):
        for label, command in runs:
            r = one_run(command, model, args.dataset, None, args.extra)
            r["round"], r["label"] = i, label
            print(json.dumps(r), flush=True)
            got[label].append(r)
    keys = ["images_per_s", "steady_images_per_s", "loader_images_per_s"]
    med = {
        label: {k: statistics.median(r[k] or 0.0 for r in rs) for k in keys}
        for label, rs in got.items()
    }
    print(f"\nmedians of {args.rounds} round(s)", file=sys.stderr)
    print(f"{'run':>12} {'img/s (wall)':>13} {'steady img/s':>13} {'loader img/s':>13}", file=sys.stderr)
    for label, m in med.items():
        print(f"{label:>12} {m[keys[0]]:>13.1f} {m[keys[1]]:>13.1f} {m[keys[2]]:>13.1f}", file=sys.stderr)
    base = runs[0][0]
    for label, _ in runs[1:]:
        ratios = ", ".join(f"{k} {med[base][k] / med[label][k]:.2f}x" for k in keys if med[label][k])
        print(f"{base} / {label}: {ratios}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trtkit", default="trtkit")
    ap.add_argument("--model", help="the ONNX model (default: the one --make-trivial writes)")
    ap.add_argument("--make-trivial", metavar="FILE", help="write the trivial model here first")
    ap.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--threads", default="1,2", help="comma list; the first is the base (default 1,2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--run", action="append", metavar="LABEL=COMMAND",
                    help="compare whole commands instead of thread counts (repeatable; the first is the base)")
    ap.add_argument("extra", nargs="*", help="after --: more validate flags")
    args = ap.parse_args()
    if args.make_trivial:
        make_trivial(args.make_trivial, args.size)
    model = args.model or args.make_trivial
    if not model:
        ap.error("give --model or --make-trivial")
    if args.run:
        return compare_runs(args, model)
    counts = [int(t) for t in args.threads.split(",")]
    runs = {t: [] for t in counts}
    for i in range(args.rounds):
        for t in counts:
            r = one_run(args.trtkit, model, args.dataset, t, args.extra)
            r["round"] = i
            print(json.dumps(r), flush=True)
            runs[t].append(r)
    keys = ["images_per_s", "steady_images_per_s", "loader_images_per_s"]
    med = {t: {k: statistics.median(r[k] for r in runs[t]) for k in keys} for t in counts}
    print(f"\nmedians of {args.rounds} round(s), {runs[counts[0]][0]['images']} images", file=sys.stderr)
    print(f"{'threads':>8} {'img/s (wall)':>13} {'steady img/s':>13} {'loader img/s':>13}", file=sys.stderr)
    for t in counts:
        m = med[t]
        print(f"{t:>8} {m[keys[0]]:>13.1f} {m[keys[1]]:>13.1f} {m[keys[2]]:>13.1f}", file=sys.stderr)
    base = counts[0]
    for t in counts[1:]:
        ratios = ", ".join(f"{k} {med[t][k] / med[base][k]:.2f}x" for k in keys)
        print(f"{t} threads / {base}: {ratios}", file=sys.stderr)


if __name__ == "__main__":
    main()
