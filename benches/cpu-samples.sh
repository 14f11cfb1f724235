#!/usr/bin/env bash
# Barrier kernels as the CUDA samples and Rodinia write them (benches/cpu-samples: barriers and
# warp shuffles in called functions, generic and const-generic ones, shared arrays declared in
# them, early returns, closures bound to locals) on the CPU device, against the same outputs
# computed by a sequential Rust loop (one thread), by rayon and by C with OpenMP
# (benches/peers/samples_openmp.c), the last three on THREADS threads (default 2) where
# parallel. Twelve cases: reduce5, sum_and_max (a generic warp-shuffle reduction), prescan
# (Blelloch), shfl_scan, histogram256, jacobi5, hotspot (Rodinia), transpose, matrix_mul,
# nbody, kmeans, bitonic_sort. Each program warms up once per case and prints the median of
# ROUNDS rounds and a digest of the output.
# Two pairings, as benches/cpu-barriers.sh: the CPU device's baseline image
# (`OFFLOAD_CPU_LEVEL=host`) against OpenMP built for portable x86-64, and the image the
# runtime selects on this CPU (the highest of `host`, `x86-64-v3`, `x86-64-v4`) against OpenMP
# built with `-march=native`; the Rust loops (portable x86-64) are in both tables.
# SIZE=small|full (default full) picks the case sizes: small runs the whole script in a minute
# or two even where the CPU device runs every kernel with one coroutine per GPU thread.
# Prints which kernels ran in region form and which on coroutines, then a Markdown table per
# pairing; exits 1 when a digest differs or a case is missing.
#
#   benches/cpu-samples.sh [ROUNDS]        # ROUNDS defaults to 5
#   SIZE=small THREADS=2 CLANG=clang-22 BENCH_DIR=/tmp/x benches/cpu-samples.sh 3
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-5}
THREADS=${THREADS:-2}
SIZE=${SIZE:-full}
CLANG=${CLANG:-clang-22}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=${BENCH_DIR:-$TARGET_DIR/cpu-samples-bench}
mkdir -p "$WORK"
case "$SIZE" in small | full) ;; *) echo "SIZE=small|full, not $SIZE" >&2; exit 2 ;; esac

# `cargo offload run --release -p cpu-samples` builds the same program: its Cargo.toml asks
# for the CPU device's images at three levels (host, x86-64-v3, x86-64-v4). A plain `cargo
# build` finds no `cargo-offload-device` unless one is installed, and then links the images
# without the CPU link's region form: the workspace's own linker is built and named instead.
(cd "$ROOT" && cargo build --release -p cargo-offload --bins >&2)
export OFFLOAD_DEVICE_LINKER=${OFFLOAD_DEVICE_LINKER:-$TARGET_DIR/release/cargo-offload-device}
(cd "$ROOT" && cargo build --release -p cpu-samples >&2)
# Portable x86-64 (no -march); no contraction to FMA, as rustc never contracts.
"$CLANG" -O3 -fopenmp -ffp-contract=off "$ROOT/benches/peers/samples_openmp.c" -lm \
    -o "$WORK/samples_openmp"
"$CLANG" -O3 -march=native -fopenmp -ffp-contract=off "$ROOT/benches/peers/samples_openmp.c" -lm \
    -o "$WORK/samples_openmp_native"

BIN=$TARGET_DIR/release/cpu-samples
unset OMP_PROC_BIND
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
OFFLOAD_CPU_LEVEL=host OFFLOAD_CPU_THREADS=$THREADS "$BIN" --peer device --size "$SIZE" "$ROUNDS" \
    | tee "$WORK/cpu-device.txt" >&2
OMP_NUM_THREADS=$THREADS "$WORK/samples_openmp" "$ROUNDS" "$SIZE" | tee "$WORK/openmp.txt" >&2
OFFLOAD_LOG=1 OFFLOAD_CPU_THREADS=$THREADS "$BIN" --peer device --size "$SIZE" "$ROUNDS" \
    2> "$WORK/cpu-device-native.log" | tee "$WORK/cpu-device-native.txt" >&2
grep 'CPU image' "$WORK/cpu-device-native.log" | head -n 1 >&2 || true
OMP_NUM_THREADS=$THREADS "$WORK/samples_openmp_native" "$ROUNDS" "$SIZE" | tee "$WORK/openmp-native.txt" >&2
"$BIN" --peer seq --size "$SIZE" "$ROUNDS" | tee "$WORK/seq.txt" >&2
RAYON_NUM_THREADS=$THREADS "$BIN" --peer rayon --size "$SIZE" "$ROUNDS" | tee "$WORK/rayon.txt" >&2
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo "How the CPU device ran each kernel (OFFLOAD_LOG=1):"
sed -n 's/^.*cpu: kernel `\([^`]*\)` has barriers; \(.*\)$/- `\1`: \2/p' "$WORK/cpu-device-native.log"
echo

# Lines: `<case> <size> rounds=R median_ms=M digest=D`; `#` lines are comments. Arguments:
# the CPU device's, the OpenMP program's, the sequential loop's and rayon's outputs.
compare() {
awk '
    function field(name,   i) {
        for (i = 3; i <= NF; i++) if (index($i, name "=") == 1) return substr($i, length(name) + 2)
        return ""
    }
    function ratio(x, dev) { return dev + 0 > 0 && x ~ /^[0-9.]+$/ ? sprintf("%.3g", x / dev) : "-" }
    /^#/ || NF == 0 { next }
    {
        key = $1 " " $2
        if (FILENAME == ARGV[1]) { order[++n] = key; dev_ms[key] = field("median_ms"); dev_d[key] = field("digest"); next }
        if (FILENAME == ARGV[2]) p = "omp"; else if (FILENAME == ARGV[3]) p = "seq"; else p = "rayon"
        ms[p, key] = field("median_ms"); d[p, key] = field("digest"); seen[p, key] = 1; all[key] = 1
    }
    END {
        print "| case | size | CPU device ms | sequential Rust ms | rayon ms | OpenMP ms | OpenMP / CPU device | sequential / CPU device | rayon / CPU device | digests equal |"
        print "|---|---|---|---|---|---|---|---|---|---|"
        bad = 0
        for (i = 1; i <= n; i++) {
            k = order[i]; split(k, parts, " ")
            same = "yes"
            for (j = 1; j <= 3; j++) {
                p = j == 1 ? "omp" : j == 2 ? "seq" : "rayon"
                if (!((p, k) in seen)) { same = "no (" p " missing)"; ms[p, k] = "missing" }
                else if (d[p, k] != dev_d[k]) same = "no"
            }
            if (same != "yes") bad = 1
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", parts[1], parts[2], dev_ms[k],
                ms["seq", k], ms["rayon", k], ms["omp", k], ratio(ms["omp", k], dev_ms[k]),
                ratio(ms["seq", k], dev_ms[k]), ratio(ms["rayon", k], dev_ms[k]), same
        }
        for (k in all) if (!(k in dev_ms)) { printf "| %s | | missing | | | | | | | no |\n", k; bad = 1 }
        exit bad
    }
' "$1" "$2" "$3" "$4"
}

status=0
echo "Baseline image (OFFLOAD_CPU_LEVEL=host) against OpenMP for portable x86-64 ($SIZE sizes, $THREADS threads):"
compare "$WORK/cpu-device.txt" "$WORK/openmp.txt" "$WORK/seq.txt" "$WORK/rayon.txt" || status=1
echo
echo "The image the runtime selects against OpenMP with -march=native ($SIZE sizes, $THREADS threads):"
compare "$WORK/cpu-device-native.txt" "$WORK/openmp-native.txt" "$WORK/seq.txt" "$WORK/rayon.txt" || status=1
exit $status
