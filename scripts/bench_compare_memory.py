#!/usr/bin/env python3
"""Peak memory and wall time of `trtkit compare` as the number of samples grows.

Runs `compare MODEL MODEL [FLAGS] --num-samples N --json` for every trtkit binary given and every
N, one after another on this machine, and prints a table: wall seconds, the child's peak resident
memory (the kernel's count, from wait4), and the run's outcome (ok, or the first line of its
error). Two binaries side by side (an older build and the current one) show what changed.

usage: scripts/bench_compare_memory.py MODEL --trtkit OLD --trtkit NEW [--samples 64 512]
           [--timeout 1200] [-- EXTRA FLAGS FOR compare]
e.g.   scripts/bench_compare_memory.py .cache/model-corpus/ppocrv4-det.onnx \\
           --trtkit /tmp/trtkit-old --trtkit target/debug/trtkit \\
           -- --input-shape x:-1x3x640x640
"""

import argparse
import os
import subprocess
import sys
import time


def run_once(binary, model, samples, extra, timeout):
    """(wall seconds, peak RSS bytes, outcome) of one compare run."""
    args = [binary, "compare", model, model, "--num-samples", str(samples), "--json", *extra]
    start = time.monotonic()
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            child.kill()
            pid, status, usage = os.wait4(child.pid, 0)
            return time.monotonic() - start, usage.ru_maxrss * 1024, f"killed after {timeout} s"
        time.sleep(0.2)
    wall = time.monotonic() - start
    stderr = child.stderr.read().decode(errors="replace").strip().splitlines()
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        outcome = "ok"
    elif code < 0:
        outcome = f"killed by signal {-code}"
    else:
        errors = [line for line in stderr if line.startswith("error")]
        outcome = f"exit {code}: " + (errors[0] if errors else (stderr[-1] if stderr else ""))
    return wall, usage.ru_maxrss * 1024, outcome


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--trtkit", action="append", required=True, help="a trtkit binary (repeat)")
    parser.add_argument("--samples", type=int, nargs="+", default=[64, 512])
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per run")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    extra = argv[cut + 1 :]
    print(f"model: {args.model}; compare flags: {' '.join(extra) or '(none)'}")
    print(f"{'binary':<40} {'samples':>8} {'wall s':>8} {'peak RSS':>10}  outcome")
    for binary in args.trtkit:
        for n in args.samples:
            wall, peak, outcome = run_once(binary, args.model, n, extra, args.timeout)
            name = binary if len(binary) <= 40 else "…" + binary[-39:]
            print(f"{name:<40} {n:>8} {wall:>8.1f} {peak / 2**30:>7.2f} GiB  {outcome}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
