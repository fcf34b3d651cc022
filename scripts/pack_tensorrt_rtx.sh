#!/usr/bin/env bash
# Pack the TensorRT-RTX libraries for the GPU machine, which receives at most 64 MiB per
# device call and has no zstd.
#
# Here (where `pip install tensorrt-rtx-cu13-libs==1.7.1.116` put the libraries):
#
#     bash scripts/pack_tensorrt_rtx.sh
#
# makes tar(libtensorrt_rtx.so.1, libtensorrt_onnxparser_rtx.so.1) | zstd -19 --long=27 and
# lays it out in two git-ignored folders, one per device call:
#
#     .carry/trt-a/part.aa           first piece of the archive (PART_A_MIB, default 39 MiB)
#     .carry/trt-b/part.ab           the rest
#     .carry/trt-b/zstd              Debian's zstd binary (needs only libc 2.34, libz, liblzma,
#                                    liblz4: all in Ubuntu 24.04's base system)
#     .carry/trt-b/*.whl             the tensorrt-rtx-cu13-bindings cp312 wheel
#     .carry/trt-b/SHA256SUMS        of the archive and of both libraries
#
# Call 1 copies .carry/trt-a/part.aa to /tmp there; call 2 runs scripts/unpack_tensorrt_rtx.sh,
# which joins, checks, unpacks and installs the bindings. The first piece is the larger one so
# that call 2 has room for the trtkit binary beside the second.
#
# Environment: PYTHON (python with tensorrt_rtx_libs; default python3), TRT_LIBDIR (folder with
# the two libraries; default: the tensorrt_rtx_libs package), BINDINGS_WHEEL (the cp312 wheel;
# fetched with pip download when missing), PART_A_MIB (default 39), JOBS (zstd threads,
# default 2), ZSTD_LEVEL (default 19).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
PART_A_MIB=${PART_A_MIB:-39}
JOBS=${JOBS:-2}
ZSTD_LEVEL=${ZSTD_LEVEL:-19}
WHEEL_NAME=tensorrt_rtx_cu13_bindings-1.7.1.116-cp312-none-manylinux_2_28_x86_64.whl
BINDINGS_WHEEL=${BINDINGS_WHEEL:-/tmp/whl/$WHEEL_NAME}
LIBS=(libtensorrt_rtx.so.1 libtensorrt_onnxparser_rtx.so.1)
LIMIT_PART=$((40 << 20))
LIMIT_DIR=$((60 << 20))

die() { echo "pack_tensorrt_rtx: $*" >&2; exit 1; }

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

A=$ROOT/.carry/trt-a
B=$ROOT/.carry/trt-b
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pack-trtrtx.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

echo "compressing ${LIBS[*]} from $TRT_LIBDIR (zstd -$ZSTD_LEVEL --long=27 -T$JOBS; a few minutes)" >&2
start=$(date +%s)
tar -C "$TRT_LIBDIR" --owner=0 --group=0 --numeric-owner -cf - "${LIBS[@]}" \
    | nice -n 10 "$ZSTD_BIN" -q "-$ZSTD_LEVEL" --long=27 "-T$JOBS" -o "$TMP/trtrtx.tar.zst"
echo "compressed in $(( $(date +%s) - start )) s" >&2

total=$(stat -c %s "$TMP/trtrtx.tar.zst")
a_bytes=$((PART_A_MIB << 20))
(( a_bytes < total )) || a_bytes=$(( (total + 1) / 2 ))
(( a_bytes < LIMIT_PART )) || die "PART_A_MIB=$PART_A_MIB is not under 40 MiB"
(( total - a_bytes < LIMIT_PART )) || die "archive of $total bytes does not fit two pieces under 40 MiB"

rm -rf "$A" "$B"
mkdir -p "$A" "$B"
head -c "$a_bytes" "$TMP/trtrtx.tar.zst" > "$A/part.aa"
tail -c +$((a_bytes + 1)) "$TMP/trtrtx.tar.zst" > "$B/part.ab"
cat "$A/part.aa" "$B/part.ab" | cmp - "$TMP/trtrtx.tar.zst" || die "split pieces do not join back"

cp "$ZSTD_BIN" "$B/zstd"
chmod 755 "$B/zstd"
cp "$BINDINGS_WHEEL" "$B/"
(
    cd "$TMP" && sha256sum trtrtx.tar.zst
    cd "$TRT_LIBDIR" && sha256sum "${LIBS[@]}"
) > "$B/SHA256SUMS"

echo "zstd needs:" >&2
readelf -d "$B/zstd" 2>/dev/null | awk '/NEEDED/ {print "  " $NF}' >&2 || true

fail=0
for d in "$A" "$B"; do
    size=$(du -cb "$d"/* | tail -1 | cut -f1)
    printf '%-22s %10d bytes (%.1f MiB)\n' "${d#"$ROOT"/}" "$size" "$(echo "$size / 1048576" | bc -l)"
    for f in "$d"/*; do
        printf '    %-58s %10d\n' "$(basename "$f")" "$(stat -c %s "$f")"
    done
    (( size < LIMIT_DIR )) || { echo "  over 60 MiB" >&2; fail=1; }
done
printf 'archive %d bytes (%.1f MiB) from %d bytes of libraries\n' "$total" "$(echo "$total / 1048576" | bc -l)" \
    "$(cd "$TRT_LIBDIR" && du -cb "${LIBS[@]}" | tail -1 | cut -f1)"
exit $fail
