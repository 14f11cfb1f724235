#!/usr/bin/env bash
# Cold build of a host crate that uses a kernel crate for sm_80,gfx90a,host:
#   prebuilt:    the kernel crate ships offload/<lib>.offload (`cargo offload package-kernels`);
#                the host's offload-build has no `llvm` feature; no device toolchain is run.
#   from source: the same host crate with offload-build's default features and
#                OFFLOAD_PREBUILT=never: LLVM, the nested -Zbuild-std builds, ptxas, ld.lld.
# Each command removes its target directory and its shared build cache (OFFLOAD_BUILD_CACHE)
# first, so every run is a cold build, a user's first; the crates.io dependencies come from the
# local registry cache either way. source-warm.sh keeps its shared build cache between runs
# (a user who has built other kernel crates before): the cache holds the nested builds' core,
# compiler_builtins and crates.io units.
#
#   benches/prebuilt.sh            # sets up $WORK and prints the commands to time
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_DIR:-/tmp/offload-prebuilt-bench}
ARCHS=${ARCHS:-sm_80,gfx90a,host}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
(cd "$ROOT" && cargo build --release -p cargo-offload >&2)
OURS=$TARGET_DIR/release/cargo-offload
rm -rf "$WORK"
mkdir -p "$WORK/kernels/src" "$WORK/prebuilt/src" "$WORK/source/src"

cat >"$WORK/kernels/Cargo.toml" <<TOML
[package]
name = "bench-kernels"
version = "0.1.0"
edition = "2024"
[package.metadata.offload]
kernels = true
[dependencies]
offload-rt = { path = "$ROOT/crates/offload-rt", version = "0.1.0", default-features = false }
[workspace]
TOML
cp "$ROOT/examples/saxpy/kernels/src/lib.rs" "$WORK/kernels/src/lib.rs"
(cd "$WORK/kernels" && CARGO_TARGET_DIR="$WORK/author-target" "$OURS" offload package-kernels --offload-arch "$ARCHS" >&2)

for variant in prebuilt source source-warm; do
    dir=${variant%-warm}
    features=$([ "$variant" = prebuilt ] && echo ', default-features = false' || true)
    cache=$WORK/cache-$variant
    clear_cache=$([ "$variant" = source-warm ] && echo true || echo "rm -rf '$cache'")
    [ "$variant" = source-warm ] || cat >"$WORK/$dir/Cargo.toml" <<TOML
[package]
name = "bench-app"
version = "0.1.0"
edition = "2024"
[package.metadata.offload]
arch = "$ARCHS"
[dependencies]
bench-kernels = { path = "$WORK/kernels" }
offload-rt = { path = "$ROOT/crates/offload-rt" }
[build-dependencies]
offload-build = { path = "$ROOT/crates/offload-build"$features }
[workspace]
TOML
    echo 'fn main() { offload_build::Build::new().compile(); }' >"$WORK/$dir/build.rs"
    echo 'fn main() { let _ = offload_rt::Device::cpu(); }' >"$WORK/$dir/src/main.rs"
    cat >"$WORK/$variant.sh" <<SH
#!/usr/bin/env bash
set -e
cd "$WORK/$dir"
rm -rf target
$clear_cache
export OFFLOAD_BUILD_CACHE='$cache'
export LLVM_SYS_221_PREFIX=/usr/lib/llvm-22 OFFLOAD_PREBUILT=$([ "$variant" = prebuilt ] && echo require || echo never)
exec cargo build --release --quiet
SH
    chmod +x "$WORK/$variant.sh"
done
echo "time these: $WORK/prebuilt.sh against $WORK/source.sh (cold) and $WORK/source-warm.sh (after one run to fill its cache)"
