#!/usr/bin/env python3
"""tract-cpu beside ONNX Runtime over sequence lengths, one machine, one run.

Runs `trtkit run MODEL --dim seq=64,128,256,512 --batch-size 1` once per backend (tract, ort;
same threads, same inputs: token ids inside the vocabulary, padded masks) and prints each
length's mean latency on both and their ratio (tract / ONNX Runtime). With --repeat N the
pair runs N times, alternating, and every run is printed.

    python3 scripts/seq_sweep.py --trtkit ./trtkit --model distilbert_like.onnx --json out.json
"""
import argparse
import json
import subprocess
import sys


def run(trtkit, model, backend, dim, seqs, threads, iterations):
    cmd = [trtkit, "run", model, "--backend", backend, "--threads", str(threads),
           "--dim", f"{dim}=" + ",".join(map(str, seqs)), "--batch-size", "1",
           "--warmup", "3", "--iterations", str(iterations), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr.strip()}")
    return {r["dims"][dim]: r["latency_ms"]["all"]["mean"] for r in json.loads(p.stdout)["results"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trtkit", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--dim", default="seq")
    ap.add_argument("--seqs", type=int, nargs="+", default=[64, 128, 256, 512])
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    runs = []
    for r in range(args.repeat):
        tract = run(args.trtkit, args.model, "tract", args.dim, args.seqs, args.threads, args.iterations)
        ort = run(args.trtkit, args.model, "ort", args.dim, args.seqs, args.threads, args.iterations)
        print(f"run {r + 1}: batch 1, {args.threads} threads, mean latency ms")
        print(f"  {args.dim:>6} {'tract':>10} {'ort':>10} {'ratio':>7}")
        for s in args.seqs:
            print(f"  {s:>6} {tract[s]:>10.2f} {ort[s]:>10.2f} {tract[s] / ort[s]:>7.2f}")
        runs.append({"tract_ms": tract, "ort_ms": ort})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "seqs": args.seqs, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
