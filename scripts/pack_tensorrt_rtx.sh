#!/usr/bin/env bash
# Packs TensorRT-RTX for a remote GPU host that accepts files of limited size: the two libraries
# in one zstd archive split into pieces of at most PIECE_MIB MiB, with checksums, a zstd binary
# (for hosts without one) and the Python bindings wheel (for hosts without a package index).
#
# usage: scripts/pack_tensorrt_rtx.sh [DIR]
#   DIR defaults to $TRTRTX_PACK_DIR, else dist/tensorrt-rtx in the repository.
#
# Run it where `pip install tensorrt-rtx-cu13-libs==1.7.1.116` put the libraries. It makes
# tar(libtensorrt_rtx.so.1, libtensorrt_onnxparser_rtx.so.1) | zstd -19 --long=27 and writes:
#
#     DIR/part.aa, part.ab, …   the archive, in pieces of at most PIECE_MIB MiB (default 39)
#     DIR/zstd                  this machine's zstd binary (the libraries it needs are listed at
#                               the end; Debian's needs only libc 2.34, libz, liblzma, liblz4)
#     DIR/*.whl                 the tensorrt-rtx-cu13-bindings cp312 wheel
#     DIR/SHA256SUMS            of the archive and of both libraries
#
# Copy every file of DIR into one folder on the host (in as many transfers as its limit needs)
# and run `eval "$(bash scripts/unpack_tensorrt_rtx.sh FOLDER)"` there: it joins the pieces,
# checks them, unpacks the libraries and installs the bindings.
#
# Environment: TRTRTX_PACK_DIR (see DIR), PYTHON (python with tensorrt_rtx_libs; default
# python3), TRT_LIBDIR (folder with the two libraries; default: the tensorrt_rtx_libs package),
# BINDINGS_WHEEL (the cp312 wheel; fetched with pip download when missing), PIECE_MIB
# (default 39), JOBS (zstd threads, default 2), ZSTD_LEVEL (default 19).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
OUT_DIR=${1:-${TRTRTX_PACK_DIR:-$ROOT/dist/tensorrt-rtx}}
PIECE_MIB=${PIECE_MIB:-39}
JOBS=${JOBS:-2}
ZSTD_LEVEL=${ZSTD_LEVEL:-19}
WHEEL_NAME=tensorrt_rtx_cu13_bindings-1.7.1.116-cp312-none-manylinux_2_28_x86_64.whl
BINDINGS_WHEEL=${BINDINGS_WHEEL:-/tmp/whl/$WHEEL_NAME}
LIBS=(libtensorrt_rtx.so.1 libtensorrt_onnxparser_rtx.so.1)

die() { echo "pack_tensorrt_rtx: $*" >&2; exit 1; }

[[ $PIECE_MIB =~ ^[1-9][0-9]*$ ]] || die "PIECE_MIB=$PIECE_MIB is not a whole number of MiB"

if [[ -z ${TRT_LIBDIR:-} ]]; then
    TRT_LIBDIR=$("$PY" -c 'import os, importlib.util as u; s = u.find_spec("tensorrt_rtx_libs"); print(os.path.dirname(s.origin) if s else "")')
    [[ -n $TRT_LIBDIR ]] || die "tensorrt_rtx_libs is not importable by $PY; run: $PY -m pip install tensorrt-rtx-cu13-libs==1.7.1.116 (or set TRT_LIBDIR)"
fi
for lib in "${LIBS[@]}"; do
    [[ -f $TRT_LIBDIR/$lib ]] || die "$TRT_LIBDIR/$lib not found"
done

if ! command -v zstd >/dev/null; then
    echo "zstd missing: installing Debian's zstd" >&2
    apt-get install -y -q zstd >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q zstd >/dev/null; } \
        || die "could not install zstd (apt-get install zstd)"
fi
ZSTD_BIN=$(command -v zstd)

if [[ ! -f $BINDINGS_WHEEL ]]; then
    echo "fetching $WHEEL_NAME" >&2
    mkdir -p "$(dirname "$BINDINGS_WHEEL")"
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 -d "$(dirname "$BINDINGS_WHEEL")" tensorrt-rtx-cu13-bindings==1.7.1.116 \
        || die "could not download the bindings wheel"
    [[ -f $BINDINGS_WHEEL ]] || die "expected $BINDINGS_WHEEL after pip download"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/pack-trtrtx.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

echo "compressing ${LIBS[*]} from $TRT_LIBDIR (zstd -$ZSTD_LEVEL --long=27 -T$JOBS; a few minutes)" >&2
start=$(date +%s)
tar -C "$TRT_LIBDIR" --owner=0 --group=0 --numeric-owner -cf - "${LIBS[@]}" \
    | nice -n 10 "$ZSTD_BIN" -q "-$ZSTD_LEVEL" --long=27 "-T$JOBS" -o "$TMP/trtrtx.tar.zst"
echo "compressed in $(( $(date +%s) - start )) s" >&2

total=$(stat -c %s "$TMP/trtrtx.tar.zst")

mkdir -p "$OUT_DIR"
# Only the files a pack consists of are replaced; anything else in DIR stays.
rm -f "$OUT_DIR"/part.?? "$OUT_DIR/zstd" "$OUT_DIR/SHA256SUMS" "$OUT_DIR"/tensorrt_rtx_cu13_bindings-*.whl
split -b "${PIECE_MIB}M" -a 2 "$TMP/trtrtx.tar.zst" "$OUT_DIR/part."
cat "$OUT_DIR"/part.?? | cmp - "$TMP/trtrtx.tar.zst" || die "split pieces do not join back"

cp "$ZSTD_BIN" "$OUT_DIR/zstd"
chmod 755 "$OUT_DIR/zstd"
cp "$BINDINGS_WHEEL" "$OUT_DIR/"
(
    cd "$TMP" && sha256sum trtrtx.tar.zst
    cd "$TRT_LIBDIR" && sha256sum "${LIBS[@]}"
) > "$OUT_DIR/SHA256SUMS"

echo "zstd needs:" >&2
readelf -d "$OUT_DIR/zstd" 2>/dev/null | awk '/NEEDED/ {print "  " $NF}' >&2 || true

pieces=("$OUT_DIR"/part.??)
echo "$OUT_DIR:"
for f in "${pieces[@]}" "$OUT_DIR/zstd" "$OUT_DIR"/tensorrt_rtx_cu13_bindings-*.whl "$OUT_DIR/SHA256SUMS"; do
    printf '    %-74s %10d\n' "$(basename "$f")" "$(stat -c %s "$f")"
done
printf 'archive %d bytes (%.1f MiB) in %d pieces of at most %d MiB, from %d bytes of libraries\n' \
    "$total" "$(echo "$total / 1048576" | bc -l)" "${#pieces[@]}" "$PIECE_MIB" \
    "$(cd "$TRT_LIBDIR" && du -cb "${LIBS[@]}" | tail -1 | cut -f1)"
