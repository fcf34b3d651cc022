#!/usr/bin/env bash
# Unpacks real photographs from the pinned scikit-image wheel into a folder, for
# scripts/int8_triage.py --photos DIR. The wheel is the one scripts/quickstart.sh fetches (into
# .cache/quickstart/wheels); it is fetched the same way if it is not there yet.
#
# The photos, named one by one (skimage/data):
#   colour   astronaut.png, chelsea.png (a cat), coffee.png (a cup), motorcycle_left.png,
#            rocket.jpg (a launch pad)
#   grey     brick.png, camera.png (the cameraman), coins.png, grass.png, gravel.png
#            (the triage script turns them into RGB; the colour photos alone are too few to hold
#            four out and still tune on several)
# Left out:
#   motorcycle_right.png  the other half of a stereo pair: nearly motorcycle_left again, it would
#                         let a photo of the tuning side reappear on the check side
#   page.png, text.png    the quick start's labelled images are made from them
#   chessboard_*, color, phantom, logo, horse, clock_motion
#                         synthetic, drawn or artificially blurred, not photographs
#   cell, ihc, microaneurysms, retina, hubble_deep_field, moon
#                         microscopy, medical and astronomical images: far from what a camera
#                         classifier meets (hubble is mostly black sky, retina a fundus image)
#
# usage: scripts/triage_photos.sh DIR     (DIR is made if needed; files already there are replaced)
set -euo pipefail
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

SCIKIT_IMAGE="0.26.0"
PHOTOS=(astronaut.png chelsea.png coffee.png motorcycle_left.png rocket.jpg
        brick.png camera.png coins.png grass.png gravel.png)

if [[ $# -ne 1 ]]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${TRTKIT_QUICKSTART_CACHE:-$root/.cache/quickstart}"
dest="$1"

mkdir -p "$cache/wheels"
wheel="$(ls "$cache/wheels/scikit_image-$SCIKIT_IMAGE-"*.whl 2>/dev/null | head -n 1 || true)"
if [[ -z "$wheel" ]]; then
  echo "downloading scikit-image $SCIKIT_IMAGE from PyPI"
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$cache/wheels" \
    --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_28_x86_64 \
    "scikit-image==$SCIKIT_IMAGE"
  wheel="$(ls "$cache/wheels/scikit_image-$SCIKIT_IMAGE-"*.whl | head -n 1)"
fi

mkdir -p "$dest"
python3 - "$wheel" "$dest" "${PHOTOS[@]}" <<'PY'
import os, sys, zipfile

wheel, dest, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with open(os.path.join(dest, name), "wb") as f:
            f.write(z.read(f"skimage/data/{name}"))
print(f"{len(names)} photos in {dest}: {', '.join(sorted(names))}")
PY
