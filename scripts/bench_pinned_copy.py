#!/usr/bin/env python3
"""Anchor for trtkit's GPU suite: PyTorch pinned host<->device copy bandwidth, timed with CUDA
events, at one size (default 64 MiB). Prints GiB/s for H2D and D2H (mean over iterations).

    python3 scripts/bench_pinned_copy.py [--mib 64] [--iters 20]
"""
import argparse

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    n = a.mib << 20
    host = torch.empty(n, dtype=torch.uint8).pin_memory()
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    s = torch.cuda.Stream()
    for name, copy in [("H2D", lambda: dev.copy_(host, non_blocking=True)),
                       ("D2H", lambda: host.copy_(dev, non_blocking=True))]:
        times = []
        with torch.cuda.stream(s):
            for i in range(a.iters + 3):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(s)
                copy()
                e1.record(s)
                e1.synchronize()
                if i >= 3:
                    times.append(e0.elapsed_time(e1))
        mean = sum(times) / len(times)
        print(f"torch pinned {name} {a.mib} MiB: mean {(n / 2**30) / (mean / 1e3):.2f} GiB/s "
              f"(best {(n / 2**30) / (min(times) / 1e3):.2f})")


if __name__ == "__main__":
    main()
