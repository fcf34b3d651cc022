#!/usr/bin/env bash
# Unpack TensorRT-RTX on the GPU machine (device call 2), from what
# scripts/pack_tensorrt_rtx.sh laid out here:
#
#     call 1 (carry .carry/trt-a):  cp .carry/trt-a/part.aa /tmp/part.aa
#     call 2 (carry .carry/trt-b):  eval "$(bash scripts/unpack_tensorrt_rtx.sh)"
#
# Joins /tmp/part.aa with .carry/trt-b/part.ab, checks the archive's sha256, decompresses it with
# the carried zstd (or Python's `zstandard` module where the binary cannot run) into
# /tmp/trtrtx/ (libtensorrt_rtx.so.1, libtensorrt_onnxparser_rtx.so.1), checks both libraries'
# sha256, installs the tensorrt-rtx bindings wheel with pip into /tmp/site (no index, no deps),
# checks that `import tensorrt_rtx_bindings` works with the libraries only in that folder, and
# prints on stdout the exports to eval (everything else goes to stderr):
#
#     export TRTKIT_TENSORRT_DIR=/tmp/trtrtx
#     export LD_LIBRARY_PATH=/tmp/trtrtx:...
#     export PYTHONPATH=/tmp/site:...
#
# Running it again is cheap: libraries whose checksums already match are kept.
#
# Environment: PART_A (default /tmp/part.aa), CARRY_B (default .carry/trt-b), DEST (default
# /tmp/trtrtx), SITE (default /tmp/site), PYTHON (default python3).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PART_A=${PART_A:-/tmp/part.aa}
B=${CARRY_B:-$ROOT/.carry/trt-b}
DEST=${DEST:-/tmp/trtrtx}
SITE=${SITE:-/tmp/site}
PY=${PYTHON:-python3}
LIBS=(libtensorrt_rtx.so.1 libtensorrt_onnxparser_rtx.so.1)

die() { echo "unpack_tensorrt_rtx: $*" >&2; exit 1; }
log() { echo "unpack_tensorrt_rtx: $*" >&2; }

[[ -f $B/SHA256SUMS ]] || die "$B/SHA256SUMS missing: was .carry/trt-b carried (and packed with scripts/pack_tensorrt_rtx.sh)?"

libs_ok() {
    (cd "$DEST" 2>/dev/null && grep -F -e "${LIBS[0]}" -e "${LIBS[1]}" "$B/SHA256SUMS" | sha256sum --quiet -c - >/dev/null 2>&1)
}

start=$(date +%s.%N)
if libs_ok; then
    log "$DEST already holds both libraries with matching checksums"
else
    [[ -f $PART_A ]] || die "$PART_A missing: call 1 (carry .carry/trt-a, cp .carry/trt-a/part.aa $PART_A) must run first, on the same warm machine"
    [[ -f $B/part.ab ]] || die "$B/part.ab missing"
    archive=$(dirname "$PART_A")/trtrtx.tar.zst
    cat "$PART_A" "$B/part.ab" > "$archive"
    want=$(awk '$2 == "trtrtx.tar.zst" {print $1}' "$B/SHA256SUMS")
    got=$(sha256sum "$archive" | cut -d' ' -f1)
    [[ $want == "$got" ]] || die "joined archive sha256 $got != $want: part.aa and part.ab come from different packs (re-run both calls)"
    rm -rf "$DEST"
    mkdir -p "$DEST"
    chmod +x "$B/zstd" 2>/dev/null || true
    if "$B/zstd" --version >/dev/null 2>&1; then
        log "decompressing with the carried zstd ($("$B/zstd" --version 2>&1 | head -1))"
        "$B/zstd" -q -d --long=27 -c "$archive" | tar -C "$DEST" -xf -
    elif "$PY" -c 'import zstandard' 2>/dev/null; then
        log "the carried zstd does not run here ($(ldd "$B/zstd" 2>&1 | grep -i 'not found' | tr '\n' ' ')); using Python's zstandard"
        "$PY" -c '
import sys, zstandard
with open(sys.argv[1], "rb") as f:
    zstandard.ZstdDecompressor(max_window_size=1 << 27).copy_stream(f, sys.stdout.buffer)
' "$archive" | tar -C "$DEST" -xf -
    else
        ldd "$B/zstd" >&2 || true
        die "cannot decompress: the carried zstd does not run here (see ldd above) and Python has no zstandard module"
    fi
    rm -f "$archive"
    libs_ok || die "library checksums in $DEST do not match $B/SHA256SUMS"
fi
log "libraries ready in $DEST ($(du -sh "$DEST" | cut -f1)) after $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"

wheel=$(ls "$B"/tensorrt_rtx_cu13_bindings-*.whl 2>/dev/null | head -1)
[[ -n $wheel ]] || die "no tensorrt_rtx_cu13_bindings wheel in $B"
if [[ ! -d $SITE/tensorrt_rtx_bindings ]]; then
    "$PY" -m pip install -q --no-index --no-deps --target "$SITE" "$wheel" >&2 \
        || die "pip install of $(basename "$wheel") failed (is $PY a CPython 3.12?)"
fi

# The bindings' extension (tensorrt_rtx_bindings/tensorrt_rtx.so) needs libtensorrt_rtx.so.1 and
# libtensorrt_onnxparser_rtx.so.1 by soname, RPATH $ORIGIN; its __init__ first tries `import
# tensorrt_rtx_libs` (the libs wheel, absent here). With the libraries only in a plain folder,
# LD_LIBRARY_PATH (set before Python starts) is what makes the import work.
PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" LD_LIBRARY_PATH="$DEST${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$PY" -c 'import tensorrt_rtx_bindings as t, sys; print("unpack_tensorrt_rtx: tensorrt_rtx_bindings", t.__version__, "imports", file=sys.stderr)' \
    || die "import tensorrt_rtx_bindings failed with PYTHONPATH=$SITE LD_LIBRARY_PATH=$DEST"

echo "export TRTKIT_TENSORRT_DIR=$DEST"
echo "export LD_LIBRARY_PATH=$DEST\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
echo "export PYTHONPATH=$SITE\${PYTHONPATH:+:\$PYTHONPATH}"
