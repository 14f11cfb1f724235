#!/usr/bin/env bash
# Two clean builds of one `cargo offload new` project in different directories (the second
# with a space in its path) must embed byte-identical device images: no paths, times or random
# names inside. Prints the SHA-256 of each build's `.llvm.offloading` section and fails when
# they differ.
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

sums=()
for dir in "$WORK/one" "$WORK/two with space"; do
    mkdir -p "$dir"
    (cd "$dir" && "$OURS" offload new demo >/dev/null)
    (cd "$dir/demo" && "$OURS" offload build --release --offload-arch "$ARCHS" -q)
    "$OBJCOPY" --dump-section=.llvm.offloading="$dir/offloading.bin" \
        "$dir/demo/target/release/demo" "$dir/stripped"
    sum=$(sha256sum "$dir/offloading.bin" | cut -d' ' -f1)
    echo "$sum  $dir"
    sums+=("$sum")
done
"$OURS" offload inspect "$WORK/one/demo/target/release/demo" | grep '^\['
if [ "${sums[0]}" != "${sums[1]}" ]; then
    echo "the two builds embed different device images" >&2
    exit 1
fi
echo "identical"
