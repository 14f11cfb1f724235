#!/usr/bin/env bash
# Cold builds of a new project (`cargo offload new`, its target directory removed before each
# build), the shared cache of nested-build units empty or warm:
#   empty.sh: `cargo offload build --offload-arch $ARCHS`, the cache emptied first;
#   warm.sh:  the same, the cache warm from another project built once for the same targets;
#   host.sh:  the same host crate's plain `cargo build`, `arch = "host"` (the template's),
#             with the warm cache.
# The crates.io dependencies come from the local registry cache in every case.
#
#   benches/cold-build.sh     # sets up $WORK and prints the three commands to time
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_DIR:-/tmp/offload-cold-build}
ARCHS=${ARCHS:-sm_80,gfx90a,host}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
(cd "$ROOT" && cargo build --release -p cargo-offload >&2)
BIN=$TARGET_DIR/release
rm -rf "$WORK"
mkdir -p "$WORK"
export PATH="$BIN:$PATH"
(cd "$WORK" && cargo offload new demo >&2 && cargo offload new other >&2)
cp "$ROOT/Cargo.lock" "$WORK/demo/" && cp "$ROOT/Cargo.lock" "$WORK/other/"

# The warm cache: another project's build for the same targets.
OFFLOAD_BUILD_CACHE="$WORK/cache-warm" cargo offload build --quiet \
    --manifest-path "$WORK/other/Cargo.toml" --offload-arch "$ARCHS" --target-dir "$WORK/target-other" >&2

write() {
    cat >"$WORK/$1.sh" <<SH
#!/usr/bin/env bash
set -e
export PATH="$BIN:\$PATH"
cd "$WORK/demo"
rm -rf "$WORK/target-$1"
$2
SH
    chmod +x "$WORK/$1.sh"
}
write empty "rm -rf '$WORK/cache-empty'
OFFLOAD_BUILD_CACHE='$WORK/cache-empty' exec cargo offload build --quiet --offload-arch '$ARCHS' --target-dir '$WORK/target-empty'"
write warm "OFFLOAD_BUILD_CACHE='$WORK/cache-warm' exec cargo offload build --quiet --offload-arch '$ARCHS' --target-dir '$WORK/target-warm'"
write host "OFFLOAD_BUILD_CACHE='$WORK/cache-warm' exec cargo build --quiet --target-dir '$WORK/target-host'"
echo "time these: $WORK/empty.sh, $WORK/warm.sh and $WORK/host.sh"
