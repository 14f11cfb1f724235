#!/usr/bin/env bash
# `cargo offload bundle` against clang-offload-bundler (clang-22) on a three-entry bundle of
# about 200 MB of real ELF code: bundle, unbundle, bundle -compress, unbundle of the
# compressed bundle. Each case runs RUNS times per tool, alternating (clang, ours, clang, …);
# wall time from bash's clock around the process, peak memory from /usr/bin/time -v
# ("Maximum resident set size"). Prints medians as a Markdown table.
#
#   benches/bundler.sh               # builds cargo-offload --release first
#   RUNS=7 OURS=path/to/cargo-offload benches/bundler.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_DIR:-/tmp/offload-bundler-bench}
RUNS=${RUNS:-5}
CLANG_BUNDLER=${CLANG_BUNDLER:-$(cargo xtask which clang-offload-bundler)}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OURS=${OURS:-}
if [ -z "$OURS" ]; then
    (cd "$ROOT" && cargo build --release -p cargo-offload >&2)
    OURS=$TARGET_DIR/release/cargo-offload
fi
# The real inputs: three large x86-64 ELF files shipped by Debian 12's LLVM and GCC packages.
HOST_IN=${HOST_IN:-/usr/lib/gcc/x86_64-linux-gnu/12/cc1}
DEV1_IN=${DEV1_IN:-/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1}
DEV2_IN=${DEV2_IN:-/usr/lib/x86_64-linux-gnu/libclang-cpp.so.22.1}
for f in "$CLANG_BUNDLER" "$OURS" "$HOST_IN" "$DEV1_IN" "$DEV2_IN" /usr/bin/time; do
    [ -e "$f" ] || { echo "missing: $f" >&2; exit 1; }
done

mkdir -p "$WORK"
cp "$HOST_IN" "$WORK/host.elf"
cp "$DEV1_IN" "$WORK/gfx90a.elf"
cp "$DEV2_IN" "$WORK/gfx942.elf"
cd "$WORK"
export OFFLOAD_BUNDLER_IGNORE_ENV_VAR=1
TARGETS=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx942
COMMON=(-type=bc -bundle-align=4096 "-targets=$TARGETS")
IN=(-input=host.elf -input=gfx90a.elf -input=gfx942.elf)
TOTAL=$(( $(stat -c %s host.elf) + $(stat -c %s gfx90a.elf) + $(stat -c %s gfx942.elf) ))

clang_tool() { "$CLANG_BUNDLER" "$@"; }
ours_tool() { "$OURS" offload bundle "$@"; }

# args: tool case → runs the case once with that tool, appends "wall_s rss_kib" to a file
run_case() {
    local tool=$1 case=$2 tag=$1
    local args
    case $case in
        bundle) args=("${COMMON[@]}" "${IN[@]}" "-output=$tag.bundle") ;;
        unbundle) args=("${COMMON[@]}" -unbundle -input=clang.bundle
            "-output=$tag.u0" "-output=$tag.u1" "-output=$tag.u2") ;;
        compress) args=("${COMMON[@]}" -compress "${IN[@]}" "-output=$tag.ccob") ;;
        unbundle-compressed) args=("${COMMON[@]}" -unbundle -input=clang.ccob
            "-output=$tag.c0" "-output=$tag.c1" "-output=$tag.c2") ;;
    esac
    local cmd
    if [ "$tool" = clang ]; then cmd=("$CLANG_BUNDLER"); else cmd=("$OURS" offload bundle); fi
    local t0 t1
    t0=$EPOCHREALTIME
    /usr/bin/time -v -o "$tag.time" "${cmd[@]}" "${args[@]}"
    t1=$EPOCHREALTIME
    local rss
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tag.time")
    echo "$(echo "$t1 - $t0" | bc -l) $rss" >>"$case.$tool.samples"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# The reference outputs the unbundle cases read.
clang_tool "${COMMON[@]}" "${IN[@]}" -output=clang.bundle
clang_tool "${COMMON[@]}" -compress "${IN[@]}" -output=clang.ccob

rm -f ./*.samples
for case in bundle unbundle compress unbundle-compressed; do
    for _ in $(seq "$RUNS"); do
        run_case clang "$case"
        run_case ours "$case"
    done
done

# Outputs must agree before the figures mean anything.
cmp clang.bundle ours.bundle
for i in 0 1 2; do cmp "clang.u$i" "ours.u$i"; cmp "clang.c$i" "ours.c$i"; done
cmp clang.u0 host.elf && cmp clang.u1 gfx90a.elf && cmp clang.u2 gfx942.elf
ours_tool -type=bc -unbundle "-targets=$TARGETS" -input=ours.ccob -output=x0 -output=x1 -output=x2
cmp x0 host.elf && cmp x1 gfx90a.elf && cmp x2 gfx942.elf && rm -f x0 x1 x2

echo "inputs: $TOTAL bytes in 3 entries ($(basename "$HOST_IN"), $(basename "$DEV1_IN"), $(basename "$DEV2_IN")); $RUNS runs per tool, alternating"
echo "clang bundle $(stat -c %s clang.bundle) bytes; compressed: clang $(stat -c %s clang.ccob) bytes, ours $(stat -c %s ours.ccob) bytes"
echo
echo "| case | clang wall | ours wall | ratio | clang peak RSS | ours peak RSS | ratio |"
echo "|---|---|---|---|---|---|---|"
for case in bundle unbundle compress unbundle-compressed; do
    cw=$(awk '{print $1}' "$case.clang.samples" | median)
    ow=$(awk '{print $1}' "$case.ours.samples" | median)
    cm=$(awk '{print $2}' "$case.clang.samples" | median)
    om=$(awk '{print $2}' "$case.ours.samples" | median)
    printf '| %s | %.3f s | %.3f s | %.2fx | %.1f MiB | %.1f MiB | %.3fx |\n' "$case" \
        "$cw" "$ow" "$(echo "$ow / $cw" | bc -l)" \
        "$(echo "$cm / 1024" | bc -l)" "$(echo "$om / 1024" | bc -l)" "$(echo "$om / $cm" | bc -l)"
done
