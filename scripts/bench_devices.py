#!/usr/bin/env python3
"""What spreading a bench matrix over every GPU of a host buys: the same matrix run with
`--device-id 0` (one GPU) and with `--devices all`, in alternating rounds, then

- the wall time of each run and the speed-up of every-GPU runs over one-GPU runs;
- each cell's samples/s on every GPU against its one-GPU figure, beside the run-to-run
  noise of the one-GPU runs themselves (the same cell, round a against round b).

    python3 scripts/bench_devices.py --trtkit target/release/trtkit --rounds 2 \\
        --results /tmp/devices -- --models resnet50.onnx --precisions fp32,fp16 \\
        --batch-sizes 1,8,32 --targets ort-cuda --duration 3

Everything after `--` is handed to every `trtkit bench` run. Each run gets its own results
folder (`one-a`, `all-a`, `one-b`, …), so every run measures every cell.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time


def run(trtkit, results, name, devices, matrix):
    placement = ["--device-id", "0"] if devices == "one" else ["--devices", "all"]
    cmd = [trtkit, "bench", *matrix, *placement, "--results", results, "--name", name, "--json"]
    start = time.monotonic()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    return wall, report


def cells(folder):
    """label -> samples/s of every measured cell of a results folder."""
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "journal*.jsonl"))):
        for line in open(path):
            r = json.loads(line)
            if r["status"] != "ok":
                continue
            k = r["key"]
            dims = "".join(f"/{n}={v}" for n, v in sorted(k.get("dims", {}).items()))
            label = f"{r['model']}/{k['precision']}/b{k['batch']}{dims}/{k['target']}"
            out[label] = r["metrics"]["samples_per_s"]
    return out


def pct(a, b):
    return 100.0 * (a - b) / b


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trtkit", default="trtkit")
    parser.add_argument("--rounds", type=int, default=2, help="alternating one-GPU / every-GPU rounds (at least 2 for the noise)")
    parser.add_argument("--results", default="results-devices", help="folder of the runs' results folders")
    parser.add_argument("matrix", nargs=argparse.REMAINDER, help="-- then the bench flags of the matrix")
    args = parser.parse_args()
    matrix = args.matrix[1:] if args.matrix[:1] == ["--"] else args.matrix
    if not matrix:
        sys.exit("give the matrix after --, e.g. -- --models m.onnx --precisions fp32 --batch-sizes 8 --targets ort-cuda")
    walls = {"one": [], "all": []}
    folders = {"one": [], "all": []}
    devices = []
    for r in range(args.rounds):
        for mode in ("one", "all"):
            name = f"{mode}-{chr(ord('a') + r)}"
            wall, report = run(args.trtkit, args.results, name, mode, matrix)
            walls[mode].append(wall)
            folders[mode].append(os.path.join(args.results, name))
            if mode == "all":
                devices = report.get("devices", [])
            print(f"{name}: {report['ran']} cells ({report['failed']} failed) in {wall:.1f} s", flush=True)
    gpus = max(len(devices), 1)
    one, every = statistics.median(walls["one"]), statistics.median(walls["all"])
    print(f"\nwall, median of {args.rounds}: one GPU {one:.1f} s, {gpus} GPUs {every:.1f} s: "
          f"speed-up {one / every:.2f}x ({one / every / gpus:.2f} of {gpus}x)")
    for d in devices:
        util = d.get("sm_util_mean_pct")
        print(f"  GPU {d['gpu']['index']}: {d['cells']} cells, busy {d['busy_pct']:.0f}%"
              + (f", SM {util:.0f}%" if util is not None else ""))
    one_runs = [cells(f) for f in folders["one"]]
    all_runs = [cells(f) for f in folders["all"]]
    print(f"\n{'cell':<44} {'one GPU':>10} {'noise':>8} {'all GPUs':>10} {'vs one':>8}")
    noises, shifts = [], []
    for label in sorted(one_runs[0]):
        base = [r[label] for r in one_runs if label in r]
        spread = [r[label] for r in all_runs if label in r]
        if not base or not spread:
            continue
        ref = statistics.median(base)
        noise = max(abs(pct(x, ref)) for x in base)
        shift = pct(statistics.median(spread), ref)
        noises.append(noise)
        shifts.append(abs(shift))
        print(f"{label:<44} {ref:>10.1f} {noise:>7.1f}% {statistics.median(spread):>10.1f} {shift:>+7.1f}%")
    if noises:
        print(f"\nmedian |change| on every GPU vs one: {statistics.median(shifts):.1f}%; "
              f"median run-to-run noise on one GPU: {statistics.median(noises):.1f}%; "
              f"cells whose change is within 2x the noise of the same cell: "
              f"{sum(s <= max(2 * n, 1.0) for s, n in zip(shifts, noises))} of {len(noises)}")


if __name__ == "__main__":
    main()
