#!/usr/bin/env bash
# Two clean builds of one `cargo offload new` project in different directories (the second
# with a space in its path) must embed byte-identical device images: no paths, times or random
# names inside. Then two clean dev builds of the first, its sources touched in between: images
# with line information must not depend on the sources' modification times. Prints the
# SHA-256 of each build's `.llvm.offloading` section and fails when two differ.
#
#   benches/reproducible.sh [ARCHS]      # default sm_80,gfx90a,host
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ARCHS=${1:-sm_80,gfx90a,host}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
(cd "$ROOT" && cargo build -q -p cargo-offload)
OURS=${CARGO_TARGET_DIR:-$ROOT/target}/debug/cargo-offload
OBJCOPY=$(cd "$ROOT" && cargo -q xtask which llvm-objcopy)

# The SHA-256 of executable $1's `.llvm.offloading` section.
offloading_sum() {
    "$OBJCOPY" --dump-section=.llvm.offloading="$WORK/offloading.bin" "$1" "$WORK/stripped"
    sha256sum "$WORK/offloading.bin" | cut -d' ' -f1
}

sums=()
for dir in "$WORK/one" "$WORK/two with space"; do
    mkdir -p "$dir"
    (cd "$dir" && "$OURS" offload new demo >/dev/null)
    (cd "$dir/demo" && "$OURS" offload build --release --offload-arch "$ARCHS" -q)
    sum=$(offloading_sum "$dir/demo/target/release/demo")
    echo "$sum  $dir"
    sums+=("$sum")
done
"$OURS" offload inspect "$WORK/one/demo/target/release/demo" | grep '^\['
if [ "${sums[0]}" != "${sums[1]}" ]; then
    echo "the two builds embed different device images" >&2
    exit 1
fi
echo "identical"

dev_sums=()
for stamp in 200001010000 203001010000; do
    find "$WORK/one/demo" -path "$WORK/one/demo/target" -prune -o -name '*.rs' \
        -exec touch -t "$stamp" {} +
    # No cache: a cached image would hide what ptxas makes of the touched sources.
    (cd "$WORK/one/demo" && cargo clean -q &&
        OFFLOAD_BUILD_CACHE=off "$OURS" offload build --offload-arch "$ARCHS" -q)
    sum=$(offloading_sum "$WORK/one/demo/target/debug/demo")
    echo "$sum  dev build, sources dated $stamp"
    dev_sums+=("$sum")
done
if [ "${dev_sums[0]}" != "${dev_sums[1]}" ]; then
    echo "the dev builds' device images depend on the sources' modification times" >&2
    exit 1
fi
echo "identical"
