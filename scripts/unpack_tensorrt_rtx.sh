#!/usr/bin/env bash
# Unpacks TensorRT-RTX from what scripts/pack_tensorrt_rtx.sh wrote, on the host that runs
# trtkit (one with no package index, no zstd, or both will do):
#
#     eval "$(bash scripts/unpack_tensorrt_rtx.sh [DIR])"
#
# DIR is the folder holding every file of the pack (part.aa, part.ab, …, zstd, the bindings
# wheel, SHA256SUMS); it defaults to $TRTRTX_PACK_DIR, else dist/tensorrt-rtx in the repository.
#
# Joins the pieces, checks the archive's sha256, decompresses it with the pack's zstd (or
# Python's `zstandard` module where that binary cannot run) into /tmp/trtrtx/
# (libtensorrt_rtx.so.1, libtensorrt_onnxparser_rtx.so.1), checks both libraries' sha256,
# installs the tensorrt-rtx bindings wheel with pip into /tmp/site (no index, no deps), checks
# that `import tensorrt_rtx_bindings` works with the libraries only in that folder, and prints
# on stdout the exports to eval (everything else goes to stderr):
#
#     export TRTKIT_TENSORRT_DIR=/tmp/trtrtx
#     export LD_LIBRARY_PATH=/tmp/trtrtx:...
#     export PYTHONPATH=/tmp/site:...
#
# Running it again is cheap: libraries whose checksums already match are kept (then only DIR's
# SHA256SUMS and wheel are read, not the pieces).
#
# Environment: TRTRTX_PACK_DIR (see DIR), DEST (default /tmp/trtrtx), SITE (default
# /tmp/site), PYTHON (default python3), TMPDIR (where the pieces are joined; default /tmp).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${1:-${TRTRTX_PACK_DIR:-$ROOT/dist/tensorrt-rtx}}
DEST=${DEST:-/tmp/trtrtx}
SITE=${SITE:-/tmp/site}
PY=${PYTHON:-python3}
LIBS=(libtensorrt_rtx.so.1 libtensorrt_onnxparser_rtx.so.1)

die() { echo "unpack_tensorrt_rtx: $*" >&2; exit 1; }
log() { echo "unpack_tensorrt_rtx: $*" >&2; }

[[ -f $B/SHA256SUMS ]] || die "$B/SHA256SUMS missing: give the folder that holds the files scripts/pack_tensorrt_rtx.sh wrote"

libs_ok() {
    (cd "$DEST" 2>/dev/null && grep -F -e "${LIBS[0]}" -e "${LIBS[1]}" "$B/SHA256SUMS" | sha256sum --quiet -c - >/dev/null 2>&1)
}

start=$(date +%s.%N)
if libs_ok; then
    log "$DEST already holds both libraries with matching checksums"
else
    pieces=("$B"/part.??)
    [[ -f ${pieces[0]} ]] || die "no pieces (part.aa, part.ab, …) in $B"
    archive=$(mktemp "${TMPDIR:-/tmp}/trtrtx.XXXXXX.tar.zst")
    trap 'rm -f "$archive"' EXIT
    cat "${pieces[@]}" > "$archive"
    want=$(awk '$2 == "trtrtx.tar.zst" {print $1}' "$B/SHA256SUMS")
    got=$(sha256sum "$archive" | cut -d' ' -f1)
    [[ $want == "$got" ]] || die "joined archive sha256 $got != $want: of the pieces found (${pieces[*]##*/}) one is missing, truncated or from another pack"
    rm -rf "$DEST"
    mkdir -p "$DEST"
    chmod +x "$B/zstd" 2>/dev/null || true
    if "$B/zstd" --version >/dev/null 2>&1; then
        log "decompressing with the pack's zstd ($("$B/zstd" --version 2>&1 | head -1))"
        "$B/zstd" -q -d --long=27 -c "$archive" | tar -C "$DEST" -xf -
    elif "$PY" -c 'import zstandard' 2>/dev/null; then
        log "the pack's zstd does not run here ($(ldd "$B/zstd" 2>&1 | grep -i 'not found' | tr '\n' ' ')); using Python's zstandard"
        "$PY" -c '
import sys, zstandard
with open(sys.argv[1], "rb") as f:
    zstandard.ZstdDecompressor(max_window_size=1 << 27).copy_stream(f, sys.stdout.buffer)
' "$archive" | tar -C "$DEST" -xf -
    else
        ldd "$B/zstd" >&2 || true
        die "cannot decompress: the pack's zstd does not run here (see ldd above) and Python has no zstandard module"
    fi
    rm -f "$archive"
    libs_ok || die "library checksums in $DEST do not match $B/SHA256SUMS"
fi
log "libraries ready in $DEST ($(du -sh "$DEST" | cut -f1)) after $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"

wheels=("$B"/tensorrt_rtx_cu13_bindings-*.whl)
wheel=${wheels[0]}
[[ -f $wheel ]] || die "no tensorrt_rtx_cu13_bindings wheel in $B"
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
