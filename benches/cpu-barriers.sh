#!/usr/bin/env bash
# Kernels with barriers on the CPU device (benches/cpu-barriers) against the same work in C
# with OpenMP (benches/peers/barriers_openmp.c), both on THREADS threads (default 2): a tiled
# matrix product (n = 512, 1024), a block reduction of 2^24 u32s, a tiled transpose and a
# 5-point stencil of 4096 x 4096 floats, a 7-point stencil of 256^3 floats, a 256-bin histogram
# of 2^24 words, and SAXPY over 2^24 floats (no barrier: throughput). Each program warms up
# once per case and prints the
# median of ROUNDS rounds (the 1024 matrix product at most 3) and a digest of the output.
# Two pairings: the CPU device's baseline image (`OFFLOAD_CPU_LEVEL=host`) against OpenMP
# built for portable x86-64, and the image the runtime selects on this CPU (the highest of
# `host`, `x86-64-v3`, `x86-64-v4`) against OpenMP built with `-march=native`.
# Prints a Markdown table per pairing; exits 1 when a digest differs or a case is missing.
#
#   benches/cpu-barriers.sh [ROUNDS]        # ROUNDS defaults to 5
#   THREADS=2 CLANG=clang-22 BENCH_DIR=/tmp/x benches/cpu-barriers.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-5}
THREADS=${THREADS:-2}
CLANG=${CLANG:-clang-22}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=${BENCH_DIR:-$TARGET_DIR/cpu-barriers-bench}
mkdir -p "$WORK"

# `cargo offload run --release -p cpu-barriers` builds the same program: its Cargo.toml asks
# for the CPU device's images at three levels (host, x86-64-v3, x86-64-v4). A plain `cargo
# build` finds no `cargo-offload-device` unless one is installed, and then links the images
# without the CPU link's region form: the workspace's own linker is built and named instead.
(cd "$ROOT" && cargo build --release -p cargo-offload --bins >&2)
export OFFLOAD_DEVICE_LINKER=${OFFLOAD_DEVICE_LINKER:-$TARGET_DIR/release/cargo-offload-device}
(cd "$ROOT" && cargo build --release -p cpu-barriers >&2)
# Portable x86-64 (no -march); no contraction to FMA, as rustc never contracts.
"$CLANG" -O3 -fopenmp -ffp-contract=off "$ROOT/benches/peers/barriers_openmp.c" \
    -o "$WORK/barriers_openmp"
"$CLANG" -O3 -march=native -fopenmp -ffp-contract=off "$ROOT/benches/peers/barriers_openmp.c" \
    -o "$WORK/barriers_openmp_native"

unset OMP_PROC_BIND
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
OFFLOAD_CPU_LEVEL=host OFFLOAD_CPU_THREADS=$THREADS "$TARGET_DIR/release/cpu-barriers" "$ROUNDS" \
    | tee "$WORK/cpu-device.txt" >&2
OMP_NUM_THREADS=$THREADS "$WORK/barriers_openmp" "$ROUNDS" | tee "$WORK/openmp.txt" >&2
OFFLOAD_LOG=1 OFFLOAD_CPU_THREADS=$THREADS "$TARGET_DIR/release/cpu-barriers" "$ROUNDS" \
    2> >(grep 'CPU image' | head -n 1 >&2) | tee "$WORK/cpu-device-native.txt" >&2
OMP_NUM_THREADS=$THREADS "$WORK/barriers_openmp_native" "$ROUNDS" | tee "$WORK/openmp-native.txt" >&2
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# Lines: `<case> <size> rounds=R median_ms=M digest=D`; `#` lines are comments.
compare() {
awk '
    function field(name,   i) {
        for (i = 3; i <= NF; i++) if (index($i, name "=") == 1) return substr($i, length(name) + 2)
        return ""
    }
    /^#/ || NF == 0 { next }
    FNR == NR { key = $1 " " $2; order[++n] = key; dev_ms[key] = field("median_ms"); dev_d[key] = field("digest"); next }
    { key = $1 " " $2; omp_ms[key] = field("median_ms"); omp_d[key] = field("digest"); seen[key] = 1 }
    END {
        print "| case | size | CPU device (median ms) | OpenMP (median ms) | OpenMP / CPU device | digests equal |"
        print "|---|---|---|---|---|---|"
        bad = 0
        for (i = 1; i <= n; i++) {
            k = order[i]; split(k, parts, " ")
            if (!(k in seen)) { printf "| %s | %s | %s | missing | | no |\n", parts[1], parts[2], dev_ms[k]; bad = 1; continue }
            same = dev_d[k] == omp_d[k] ? "yes" : "no"
            if (same == "no") bad = 1
            ratio = dev_ms[k] + 0 > 0 ? sprintf("%.3g", omp_ms[k] / dev_ms[k]) : "-"
            printf "| %s | %s | %s | %s | %s | %s |\n", parts[1], parts[2], dev_ms[k], omp_ms[k], ratio, same
        }
        for (k in seen) if (!(k in dev_ms)) { printf "| %s | | missing | %s | | no |\n", k, omp_ms[k]; bad = 1 }
        exit bad
    }
' "$1" "$2"
}

status=0
echo "Baseline image (OFFLOAD_CPU_LEVEL=host) against OpenMP for portable x86-64:"
compare "$WORK/cpu-device.txt" "$WORK/openmp.txt" || status=1
echo
echo "The image the runtime selects against OpenMP with -march=native:"
compare "$WORK/cpu-device-native.txt" "$WORK/openmp-native.txt" || status=1
exit $status
