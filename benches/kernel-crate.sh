#!/usr/bin/env bash
# Build time and code size of a 48-kernel crate (benches/kernel-crate) in its two variants:
# `checked` (ordinary safe Rust: bounds checks, unwraps, checked divisions; every kernel can
# panic) and `unchecked` (the same source with the `unchecked` feature: no reachable panic).
#
# For each variant and run: `cargo offload build --release --offload-arch $ARCHS` from cold,
# with a fresh target directory and a fresh OFFLOAD_BUILD_CACHE, so the nested
# `-Zbuild-std=core` builds and the host crate's dependencies are included. After the last
# run, the kernel crate alone is rebuilt (its lib.rs touched, the cache off): its compile for
# every target and the device links. Then, from the last run's executable, for each variant:
# the images' sizes (PTX, cubin, AMD code object), the kernels with a panic path and the trap
# instructions per architecture, and the SASS size of the TOP largest kernels per `sm`
# (with cuobjdump). Prints Markdown tables; exits 1 when a build fails or a kernel of the
# unchecked variant has a panic path.
#
#   benches/kernel-crate.sh [RUNS]          # RUNS defaults to 1
#   BIN=target/debug ARCHS=sm_80,gfx90a TOP=5 BENCH_DIR=/tmp/x benches/kernel-crate.sh
#
# BIN is the directory of the `cargo-offload` and `cargo-offload-device` to use (default:
# build them with `cargo build --release -p cargo-offload`). Run nothing else meanwhile: the
# builds use every core.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${1:-1}
ARCHS=${ARCHS:-sm_80,sm_90,gfx90a,gfx942,gfx1100}
TOP=${TOP:-10}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=${BENCH_DIR:-$TARGET_DIR/kernel-crate-bench}
CRATE=$ROOT/benches/kernel-crate
EXE=kernel-crate-bench
VARIANTS=(checked unchecked)

if [[ -z ${BIN:-} ]]; then
    (cd "$ROOT" && cargo build --release -p cargo-offload >&2)
    BIN=$TARGET_DIR/release
fi
BIN=$(cd "$BIN" && pwd)
export PATH="$BIN:$PATH"
export OFFLOAD_DEVICE_LINKER=${OFFLOAD_DEVICE_LINKER:-$BIN/cargo-offload-device}
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || true)}
LLVM_OBJDUMP=${LLVM_OBJDUMP:-$(command -v llvm-objdump-22 || command -v llvm-objdump || true)}
mkdir -p "$WORK"

now() { date +%s.%N; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# build VARIANT LOG [ENV...]: the variant's build into $WORK/VARIANT, its output in LOG.
build() {
    local variant=$1 log=$2
    shift 2
    local features=()
    [[ $variant == unchecked ]] && features=(--features unchecked)
    if ! env "$@" cargo offload build --release --offload-arch "$ARCHS" \
        --manifest-path "$CRATE/Cargo.toml" --target-dir "$WORK/$variant/target" \
        ${features[@]+"${features[@]}"} >"$log" 2>&1; then
        cat "$log" >&2
        echo "error: the $variant build failed (log: $log)" >&2
        exit 1
    fi
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
declare -A cold rebuild
for run in $(seq 1 "$RUNS"); do
    for variant in "${VARIANTS[@]}"; do
        dir=$WORK/$variant
        rm -rf "$dir"
        mkdir -p "$dir"
        echo "run $run: $variant, cold" >&2
        start=$(now)
        build "$variant" "$dir/build.log" OFFLOAD_BUILD_CACHE="$dir/cache"
        t=$(seconds "$start" "$(now)")
        echo "  $t s" >&2
        cold[$variant]="${cold[$variant]:-} $t"
    done
done
for variant in "${VARIANTS[@]}"; do
    echo "$variant: the kernel crate alone" >&2
    touch "$CRATE/kernels/src/lib.rs"
    start=$(now)
    # The cache off, or the device link would find its images by content.
    build "$variant" "$WORK/$variant/rebuild.log" OFFLOAD_BUILD_CACHE=off
    rebuild[$variant]=$(seconds "$start" "$(now)")
    echo "  ${rebuild[$variant]} s" >&2
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# analyze VARIANT: writes $WORK/VARIANT/report.tsv, lines of
#   size ARCH KIND BYTES | panic ARCH KERNELS TRAPS | sass ARCH KERNEL BYTES
analyze() {
    local dir=$WORK/$1 f arch kind
    rm -rf "$dir/images"
    mkdir -p "$dir/images"
    (cd "$dir/images" && cargo offload package "$dir/target/release/$EXE" \
        --image=triple=nvptx64-nvidia-cuda --image=triple=amdgcn-amd-amdhsa >/dev/null)
    : >"$dir/report.tsv"
    for arch in ${ARCHS//,/ }; do
        [[ $arch == host ]] && continue
        for f in "$dir/images/$EXE-"*"-$arch".*; do
            [[ -e $f ]] || continue
            case $f in
                *.cubin) kind=cubin ;;
                *.s) kind=ptx ;;
                *) kind=code-object ;;
            esac
            printf 'size\t%s\t%s\t%s\n' "$arch" "$kind" "$(wc -c <"$f")" >>"$dir/report.tsv"
            case $kind in
                ptx)
                    # Kernels (`.entry`) whose body calls the panic reporter.
                    awk -v arch="$arch" '
                        /^\.(visible )?\.entry/ { inside = 1; hit = 0; next }
                        /^\.(visible )?\.func/ { inside = 0 }
                        inside && !hit && /call.*__offload_gpu_panic/ { hit = 1; n++ }
                        END { printf "ptxpanic\t%s\t%d\n", arch, n }
                    ' "$f" >>"$dir/report.tsv"
                    ;;
                cubin)
                    [[ -n $CUOBJDUMP ]] || continue
                    "$CUOBJDUMP" -sass "$f" | awk -v arch="$arch" '
                        /Function : / { k = $NF; next }
                        k != "" && /\/\*[0-9a-f]+\*\/ / {
                            bytes[k] += 16
                            if (/BPT\.TRAP/) { traps++; trapped[k] = 1 }
                        }
                        END {
                            for (k in bytes) printf "sass\t%s\t%s\t%d\n", arch, k, bytes[k]
                            for (k in trapped) n++
                            printf "traps\t%s\t%d\t%d\n", arch, n, traps
                        }
                    ' >>"$dir/report.tsv"
                    ;;
                code-object)
                    [[ -n $LLVM_OBJDUMP ]] || continue
                    "$LLVM_OBJDUMP" -d "$f" | awk -v arch="$arch" '
                        /^[0-9a-f]+ <[^>]+>:$/ { k = $2; next }
                        /s_trap/ { traps++; trapped[k] = 1 }
                        END {
                            for (k in trapped) n++
                            printf "traps\t%s\t%d\t%d\n", arch, n, traps
                        }
                    ' >>"$dir/report.tsv"
                    ;;
            esac
        done
    done
}
for variant in "${VARIANTS[@]}"; do
    analyze "$variant"
done

C=$WORK/checked/report.tsv
U=$WORK/unchecked/report.tsv

echo "## Build time (wall seconds; $ARCHS)"
echo
echo "| variant | cold builds | kernel crate alone |"
echo "|---|---|---|"
for variant in "${VARIANTS[@]}"; do
    echo "| $variant |${cold[$variant]} | ${rebuild[$variant]} |"
done
echo
echo "## Image sizes (bytes)"
echo
awk -F'\t' '
    $1 != "size" { next }
    FNR == NR { key = $2 " " $3; order[++n] = key; c[key] = $4; next }
    { u[$2 " " $3] = $4 }
    END {
        print "| arch | image | checked | unchecked | unchecked / checked |"
        print "|---|---|---|---|---|"
        for (i = 1; i <= n; i++) {
            k = order[i]; split(k, p, " "); ct[p[2]] += c[k]; ut[p[2]] += u[k]
            printf "| %s | %s | %d | %d | %.3f |\n", p[1], p[2], c[k], u[k], c[k] ? u[k] / c[k] : 0
        }
        split("ptx cubin code-object", kinds, " ")
        for (i = 1; i <= 3; i++) {
            kind = kinds[i]
            if (kind in ct)
                printf "| all | %s | %d | %d | %.3f |\n", kind, ct[kind], ut[kind], ct[kind] ? ut[kind] / ct[kind] : 0
        }
    }
' "$C" "$U"
echo
echo "## Panic paths (of $(grep -c '#\[kernel\]' "$CRATE"/kernels/src/*.rs | awk -F: '{ s += $2 } END { print s }') kernels)"
echo
echo "Kernels whose PTX calls the panic reporter; kernels with a trap instruction, and trap"
echo "instructions, in the SASS (BPT.TRAP) or AMD code (s_trap)."
echo
awk -F'\t' '
    $1 != "ptxpanic" && $1 != "traps" { next }
    FNR == NR { if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } c[$1, $2] = $3 " / " $4; next }
    { u[$1, $2] = $3 " / " $4 }
    END {
        print "| arch | checked: PTX kernels calling it | checked: kernels / traps | unchecked: PTX kernels calling it | unchecked: kernels / traps |"
        print "|---|---|---|---|---|"
        for (i = 1; i <= n; i++) {
            a = order[i]
            printf "| %s | %s | %s | %s | %s |\n", a, field(c, "ptxpanic", a), field(c, "traps", a), field(u, "ptxpanic", a), field(u, "traps", a)
        }
    }
    function field(t, kind, a,   v) {
        if (!((kind, a) in t)) return "-"
        v = t[kind, a]; sub(/ \/ $/, "", v); return v
    }
' "$C" "$U"
if [[ -n $CUOBJDUMP ]]; then
    for arch in ${ARCHS//,/ }; do
        [[ $arch == sm_* ]] || continue
        echo
        echo "## SASS of the $TOP largest kernels, $arch (bytes)"
        echo
        echo "| kernel | checked | unchecked | unchecked / checked |"
        echo "|---|---|---|---|"
        awk -F'\t' -v arch="$arch" '
            $1 != "sass" || $2 != arch { next }
            FNR == NR { c[$3] = $4; next }
            { u[$3] = $4 }
            END { for (k in c) printf "%d\t%s\t%d\n", c[k], k, u[k] }
        ' "$C" "$U" | sort -t$'\t' -k1,1nr | head -n "$TOP" |
            awk -F'\t' '{ printf "| %s | %d | %d | %.3f |\n", $2, $1, $3, $1 ? $3 / $1 : 0 }'
    done
else
    echo
    echo "(no cuobjdump: no per-kernel SASS sizes)"
fi

# The unchecked variant must have no panic path.
if awk -F'\t' '($1 == "ptxpanic" && $3 > 0) || ($1 == "traps" && $3 > 0) { bad = 1 } END { exit !bad }' "$U"; then
    echo "error: a kernel of the unchecked variant has a panic path (see $U)" >&2
    exit 1
fi
