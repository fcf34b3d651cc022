#!/usr/bin/env python3
"""Checks the parity fixture's reference arrays against torchvision itself.

make_parity_fixture.py re-states torchvision's Resize(256) + CenterCrop(224) + ToTensor() with
PIL alone; this script runs the real transforms (where torch is installed) on the fixture JPEGs
and prints the largest difference from the stored .npy arrays, in units of 1/255.

Usage: python3 scripts/check_parity_reference.py [tests/fixtures/parity]
"""
import glob
import os
import sys

import numpy as np
from PIL import Image
from torchvision import transforms


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/parity"
    t = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor()])
    worst = 0.0
    for jpg in sorted(glob.glob(os.path.join(folder, "*.jpg"))):
        ours = np.load(jpg[:-4] + ".npy").astype(np.float32) / 255.0
        theirs = t(Image.open(jpg).convert("RGB")).numpy().transpose(1, 2, 0)
        err = float(np.abs(ours - theirs).max()) * 255.0
        worst = max(worst, err)
        print(f"{os.path.basename(jpg)}: max |fixture - torchvision| = {err:.4f}/255")
    print(f"worst: {worst:.4f}/255")
    return 0 if worst < 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
