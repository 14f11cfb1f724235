#!/usr/bin/env bash
# The device images of every kernel crate of the repository, one line each: the SHA-256 of the
# image bytes, its triple, arch and bundle, and the crate. Run it with two builds of
# cargo-offload (before and after a change of the device link) and compare the two lists:
# a change that should not alter code generation must leave every line as it was.
#
#   benches/image-identity.sh OUT [ARCHS]   # cargo-offload from PATH; OUT/sums.txt
#   diff before/sums.txt after/sums.txt
#
# Default ARCHS: every GPU architecture the device link is tested on and two CPU levels. The
# build and link caches are off, so each image is linked anew. Crates whose kernels link
# CUDA/HIP sources of the host build (`rdc-kernels`, `mixed`) are left out: they package only
# inside the host's build.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
ARCHS=${2:-sm_80,sm_90,sm_90a,gfx90a,gfx942,gfx1100,host,x86-64-v3}
export OFFLOAD_BUILD_CACHE=off
: > "$OUT/sums.txt"
crates=$(cd "$ROOT" && grep -rl --include=Cargo.toml '^kernels = true' benches examples \
    crates/offload-rt/tests/fixtures crates/offload-build/tests/fixtures |
    xargs -n1 dirname | grep -v -e rdc-kernels -e '^examples/mixed' | sort)
for crate in $crates; do
    log="$OUT/$(echo "$crate" | tr / _).log"
    (cd "$ROOT/$crate" && CARGO_TARGET_DIR="$OUT/target" \
        cargo offload package-kernels --offload-arch "$ARCHS") > "$log" 2>&1 ||
        { echo "FAILED $crate (see $log)" | tee -a "$OUT/sums.txt"; continue; }
    for bundle in "$ROOT/$crate"/offload/*.offload; do
        python3 - "$bundle" "$crate" >> "$OUT/sums.txt" <<'PY'
import hashlib, struct, sys
path, crate = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
at = 0
while at < len(data):
    magic, _, size, entry, _ = struct.unpack_from("<4sIQQQ", data, at)
    assert magic == b"\x10\xff\x10\xad", f"{path}: no OffloadBinary at {at}"
    _, _, _, strings, count, image, image_size = struct.unpack_from("<HHIQQQQ", data, at + entry)
    meta = {}
    for i in range(count):
        key, value = struct.unpack_from("<QQ", data, at + strings + 16 * i)
        text = lambda o: data[at + o:data.index(b"\0", at + o)].decode()
        meta[text(key)] = text(value)
    digest = hashlib.sha256(data[at + image:at + image + image_size]).hexdigest()
    print(digest, meta.get("triple"), meta.get("arch"), path.rsplit("/", 1)[-1], crate)
    at += size
PY
        rm "$bundle"
    done
    rmdir "$ROOT/$crate/offload" 2>/dev/null || true
done
rm -rf "$OUT/target"
sort -o "$OUT/sums.txt" "$OUT/sums.txt"
echo "$(grep -vc '^FAILED' "$OUT/sums.txt") images in $OUT/sums.txt"
