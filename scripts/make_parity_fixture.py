#!/usr/bin/env python3
"""Makes the preprocessing parity fixture: a few synthetic photo-like JPEGs and, for each, the
reference output of torchvision's Resize(256) + CenterCrop(224) + ToTensor() on the PIL image.

torchvision is not needed: its PIL path is re-stated here with PIL itself (shorter side to 256
with int(256 * long / short) for the longer side, Image.BILINEAR, then a crop whose corner is
int(round((size - 224) / 2))). ToTensor() is exactly uint8 / 255, so the reference is stored as
the uint8 crop (H, W, 3) in .npy form; the Rust test divides by 255.

Usage: python3 scripts/make_parity_fixture.py [--out tests/fixtures/parity]
Needs: pip install pillow numpy
"""
import argparse
import os

import numpy as np
from PIL import Image, ImageFilter


def photo_like(w, h, seed, gray=False):
    """Smooth colour fields, edges and fine texture: what JPEG and resizing find in photos."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 3), np.float32)
    for c in range(3):
        for _ in range(4):
            fx, fy = rng.uniform(0.002, 0.03, 2)
            px, py = rng.uniform(0, 6.28, 2)
            img[..., c] += rng.uniform(20, 50) * np.sin(fx * x + px) * np.cos(fy * y + py)
        img[..., c] += rng.uniform(70, 180)
    for _ in range(6):  # hard-edged objects
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(10, min(w, h) / 3)
        mask = (x - cx) ** 2 + (y - cy) ** 2 < r * r
        img[mask] = img[mask] * 0.4 + rng.uniform(0, 255, 3) * 0.6
    img += rng.normal(0, 6, img.shape)  # sensor-like noise
    img[::7, :, :] += 12  # fine periodic texture (fabric, fences): stresses antialiasing
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(0.6))
    return pil.convert("L") if gray else pil


def reference(path, size=256, crop=224):
    img = Image.open(path).convert("RGB")
    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size, int(size * long / short)
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    img = img.resize((new_w, new_h), Image.BILINEAR)
    top = int(round((new_h - crop) / 2.0))
    left = int(round((new_w - crop) / 2.0))
    img = img.crop((left, top, left + crop, top + crop))
    return np.asarray(img, dtype=np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/fixtures/parity")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # name, size, seed, PIL mode, extra save options. Besides baseline 4:2:0 colour and
    # grayscale: CMYK (Adobe-inverted, as PIL writes and reads it) and a progressive file with
    # 4:2:2 chroma (horizontal-only upsampling).
    images = [
        ("landscape_500x375.jpg", 500, 375, 1, "RGB", {}),
        ("portrait_375x500.jpg", 375, 500, 2, "RGB", {}),
        ("wide_640x427.jpg", 640, 427, 3, "RGB", {}),
        ("gray_333x250.jpg", 333, 250, 4, "L", {}),
        ("cmyk_300x260.jpg", 300, 260, 5, "CMYK", {}),
        ("progressive422_420x300.jpg", 420, 300, 6, "RGB", {"progressive": True, "subsampling": "4:2:2"}),
    ]
    for name, w, h, seed, mode, options in images:
        path = os.path.join(args.out, name)
        photo_like(w, h, seed).convert(mode).save(path, quality=90, **options)
        ref = reference(path)
        np.save(os.path.join(args.out, name.rsplit(".", 1)[0] + ".npy"), ref)
        print(f"{path}: {os.path.getsize(path)} bytes, reference {ref.shape} {ref.dtype}")


if __name__ == "__main__":
    main()
