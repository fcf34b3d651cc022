#!/usr/bin/env bash
# Fetches ONNX's own backend test data (models with inputs and expected outputs) from the
# `onnx` wheel on PyPI, at a pinned version, into a cache folder. Idempotent: a complete
# earlier extraction is reused.
#
# usage: scripts/fetch-onnx-test-data.sh [DEST]
#   DEST defaults to $TRTKIT_ONNX_TEST_DATA, else .cache/onnx-test-data in the repository.
set -euo pipefail

ONNX_VERSION="1.19.1"
SUITES=(simple pytorch-converted pytorch-operator light)

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-${TRTKIT_ONNX_TEST_DATA:-$root/.cache/onnx-test-data}}"
stamp="$dest/.complete-onnx-$ONNX_VERSION"

if [[ -f "$stamp" ]]; then
  echo "onnx test data $ONNX_VERSION already in $dest"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "downloading the onnx $ONNX_VERSION wheel from PyPI"
python3 -m pip download --quiet --no-deps --only-binary=:all: \
  --python-version 3.11 --implementation cp --abi cp311 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$work" "onnx==$ONNX_VERSION"
wheel="$(ls "$work"/onnx-*.whl)"

patterns=()
for s in "${SUITES[@]}"; do patterns+=("onnx/backend/test/data/$s/*"); done
python3 - "$wheel" "$work/x" "${patterns[@]}" <<'PY'
import fnmatch, sys, zipfile
wheel, out, pats = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if any(fnmatch.fnmatch(n, p) for p in pats)]
    z.extractall(out, names)
print(f"extracted {len(names)} files")
PY

rm -rf "$dest.partial"
mkdir -p "$(dirname "$dest")"
mv "$work/x/onnx/backend/test/data" "$dest.partial"
rm -rf "$dest"
mv "$dest.partial" "$dest"
touch "$stamp"
for s in "${SUITES[@]}"; do
  echo "$s: $(find "$dest/$s" -name '*.onnx' | wc -l) models"
done
