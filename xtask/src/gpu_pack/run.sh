#!/usr/bin/env bash
# The GPU pack's runner (`cargo xtask gpu-pack DIR` writes it): every GPU test binary, example,
# fixture kernel and benchmark in bin/, in one process tree. It never stops at a failure: it
# prints a summary table, writes results.json and results.md beside itself (the machine, its
# driver, each step with its status, digest and figures) and ends with a summary line.
#
#   ./run.sh                      on a GPU machine: NVIDIA and AMD parts where their GPU is
#   OFFLOAD_DEVICE=cpu ./run.sh   anywhere: the same programs on the CPU device
#
# Each step's status:
#   PASS    it ran, its results are right and, for a benchmark with a goal, the goal was met
#   MISSED  it ran and its results are right, but a benchmark's goal was not met (gpu_bench's
#           targets; parity_bench: every kernel at 0.95x of its CUDA C twin or more; gemm
#           --bench on an NVIDIA GPU: 0.60x of cuBLAS or more at each size)
#   FAIL    wrong results, a crash or a timeout, or a check that could not be made where it
#           applies (a benchmark that finds no CUDA device on a machine with an NVIDIA GPU,
#           gemm without a ratio to cuBLAS there)
#   SKIP    not for this machine: no GPU of the kind the step needs (or no such library)
#
# Exit status: 1 if any step FAILED; else 3 if any goal was MISSED; else 0.
#
# OFFLOAD_PACK_STEP_TIMEOUT (seconds, default 240) bounds each step.
#
# Two modes read what a run wrote and start nothing (xtask's tests check the labels with them):
#   ./run.sh --classify gpu_bench|parity_bench|gemm RC NVIDIA LOG
#       the status and detail of a benchmark that exited with RC and wrote LOG, on a machine
#       with (NVIDIA=1) or without (0) an NVIDIA GPU, as "STATUS<tab>DETAIL"
#   ./run.sh --summarize TSV
#       the summary line of the steps in TSV (logs/results.tsv), exiting as the run would
set -u

# ---- the labels -----------------------------------------------------------------------------
# The goals run.sh holds the benchmarks to where they print a ratio (gpu_bench judges its own).
parity_goal=0.95
gemm_goal=0.60
# The Hopper kernel (`gemm_tma`, its lines "gemm-tma ratio-to-cublas N=…", on an sm_90a image).
gemm_tma_goal=0.90
# Attention's forward pass at head dimension 128 over 8192 tokens, TFLOP/s (issue goal).
attention_goal=450

# The goals a benchmark's log says it missed, one short phrase each: the figure's name and the
# words before its goal ("launch overhead: …ratio 1.21x (target <= 1.1x: MISSED)").
missed() {
    awk '/MISSED/ {
        name = $0; sub(/[,:].*/, "", name)
        n = index($0, "(target"); from = n > 31 ? n - 30 : 1
        printf "%s: ...%s; ", name, substr($0, from)
    }' "$1" | cut -c1-300
}

# bench_status BENCH RC NVIDIA LOG: prints "STATUS<tab>DETAIL" for the benchmark BENCH
# (gpu_bench, parity_bench or gemm) that exited with RC and wrote LOG (stdout and stderr), on a
# machine with (NVIDIA=1) or without an NVIDIA GPU.
bench_status() {
    local bench=$1 rc=$2 nvidia=$3 log=$4
    local short="logs/$(basename "$log")"
    # gpu_bench and parity_bench exit 2 where they find no CUDA device: a skip where there is
    # none, a failure where nvidia-smi lists one.
    case "$bench:$rc" in
    gpu_bench:2 | parity_bench:2)
        if [ "$nvidia" = 1 ]; then
            printf 'FAIL\texit 2 (no CUDA device) on a machine with an NVIDIA GPU: %s\n' \
                "$(tail -n 1 "$log" | cut -c1-160)"
        else
            printf 'SKIP\t%s\n' "$(tail -n 1 "$log" | cut -c1-120)"
        fi
        return
        ;;
    esac
    case "$bench" in
    gpu_bench)
        # It prints each target with "met" or "MISSED" and exits 1 when one is missed; an
        # error ends it with "gpu_bench: <error>" and exit 1 too.
        local goals met error
        goals="$(missed "$log")"
        met=$(grep -c '(target .*: met)' "$log")
        error="$(grep -m 1 '^gpu_bench: ' "$log" | cut -c1-160)"
        if [ "$rc" = 0 ] && [ -z "$goals" ] && [ "$met" -gt 0 ]; then
            printf 'PASS\tevery target met, %s of them (figures in results.md)\n' "$met"
        elif [ -n "$goals" ] && [ -z "$error" ] && { [ "$rc" = 0 ] || [ "$rc" = 1 ]; }; then
            printf 'MISSED\t%s(figures in results.md)\n' "$goals"
        elif [ "$rc" = 0 ]; then
            printf 'FAIL\texit 0 but no target in the output (see %s)\n' "$short"
        else
            printf 'FAIL\texit %s: %s%s(see %s)\n' "$rc" "${error:+$error; }" "$goals" "$short"
        fi
        ;;
    parity_bench)
        # One row per kernel: name, Rust ms, C ms, C/Rust, "agree" or "DIFFER"; exit 1 when
        # outputs differ (or on an error, "parity_bench: <error>").
        local rows differ below lowest geomean error
        rows="$(awk 'NF == 5 && ($5 == "agree" || $5 == "DIFFER") && $4 ~ /^[0-9.]+$/ { print $1, $4, $5 }' "$log")"
        differ="$(printf '%s\n' "$rows" | awk '$3 == "DIFFER" { printf "%s%s", (n++ ? ", " : ""), $1 }')"
        below="$(printf '%s\n' "$rows" | awk -v goal="$parity_goal" 'NF == 3 && $2 + 0 < goal + 0 {
            printf "%s%s %sx", (n++ ? ", " : ""), $1, $2 }')"
        lowest="$(printf '%s\n' "$rows" | awk 'NF == 3 && (!n++ || $2 + 0 < low + 0) { low = $2; name = $1 }
            END { if (n) printf "%s %sx", name, low }')"
        geomean="$(sed -n 's/^geometric mean of C\/Rust[^:]*: \([0-9.]*\).*/\1/p' "$log" | head -n 1)"
        error="$(grep -m 1 '^parity_bench: ' "$log" | cut -c1-160)"
        local kernels
        kernels=$(printf '%s\n' "$rows" | awk 'NF == 3' | wc -l)
        if [ -n "$differ" ]; then
            printf 'FAIL\texit %s: outputs differ from CUDA C'"'"'s: %s (see %s)\n' "$rc" "$differ" "$short"
        elif [ "$rc" != 0 ]; then
            printf 'FAIL\texit %s: %s(see %s)\n' "$rc" "${error:+$error }" "$short"
        elif [ "$kernels" = 0 ]; then
            printf 'FAIL\texit 0 but no kernel timed (see %s)\n' "$short"
        elif [ -n "$below" ]; then
            printf 'MISSED\tunder %sx of CUDA C: %s; geometric mean %s; outputs agree\n' \
                "$parity_goal" "$below" "${geomean:-?}"
        else
            printf 'PASS\t%s kernels, each at %sx of CUDA C or more (lowest %s); geometric mean %s; outputs agree\n' \
                "$kernels" "$parity_goal" "$lowest" "${geomean:-?}"
        fi
        ;;
    gemm)
        # A table row per size, then "gemm ratio-to-cublas N=4096 0.0600" lines (the kernel's
        # speed over cuBLAS's) where cuBLAS ran; the goal applies on an NVIDIA GPU.
        local table ratios below error why
        table="$(grep '^| [0-9]' "$log" | tr '\n' ' ' | cut -c1-200)"
        ratios="$(awk '$1 == "gemm" && $2 == "ratio-to-cublas" && $3 ~ /^N=/ && $4 ~ /^[0-9.]+$/ {
            printf "%s%s %sx", (n++ ? ", " : ""), $3, $4 }' "$log")"
        below="$(awk -v goal="$gemm_goal" -v tma="$gemm_tma_goal" '($1 == "gemm" || $1 == "gemm-tma") && $2 == "ratio-to-cublas" && $4 ~ /^[0-9.]+$/ && $4 + 0 < ($1 == "gemm" ? goal : tma) + 0 {
            printf "%s%s%s %sx", (n++ ? ", " : ""), ($1 == "gemm" ? "" : "gemm_tma "), $3, $4 }' "$log")"
        error="$(grep -m 1 '^error: ' "$log" | cut -c1-160)"
        if [ "$rc" != 0 ]; then
            printf 'FAIL\texit %s: %s(see %s)\n' "$rc" "${error:+$error }" "$short"
        elif [ "$nvidia" != 1 ]; then
            printf 'PASS\tno goal off an NVIDIA GPU, figures only: %s\n' "$table"
        elif [ -z "$ratios" ]; then
            why="$(grep -m 1 '^cuBLAS: ' "$log" | cut -c1-120)"
            printf 'FAIL\tno ratio to cuBLAS in the output, so the goal (%sx of cuBLAS) went unchecked%s (see %s)\n' \
                "$gemm_goal" "${why:+: $why}" "$short"
        elif [ -n "$below" ]; then
            printf 'MISSED\tunder %sx of cuBLAS (gemm_tma: %sx): %s\n' "$gemm_goal" "$gemm_tma_goal" "$below"
        else
            printf 'PASS\tat least %sx of cuBLAS: %s\n' "$gemm_goal" "$ratios"
        fi
        ;;
    attention)
        # A table row per variant, then "attention tflops D=128 N=8192 f16 causal=0 312.4"
        # lines; the goal applies on an NVIDIA GPU to head dimension 128 over 8192 tokens,
        # without the causal mask.
        local table rates below error
        table="$(grep '^| [0-9]' "$log" | head -n 4 | tr '\n' ' ' | cut -c1-200)"
        rates="$(awk '$1 == "attention" && $2 == "tflops" && $3 == "D=128" && $4 == "N=8192" && $6 == "causal=0" && $7 ~ /^[0-9.]+$/ {
            printf "%s%s %s", (n++ ? ", " : ""), $5, $7 }' "$log")"
        below="$(awk -v goal="$attention_goal" '$1 == "attention" && $2 == "tflops" && $3 == "D=128" && $4 == "N=8192" && $6 == "causal=0" && $7 ~ /^[0-9.]+$/ && $7 + 0 < goal + 0 {
            printf "%s%s %s TFLOP/s", (n++ ? ", " : ""), $5, $7 }' "$log")"
        error="$(grep -m 1 '^error: ' "$log" | cut -c1-160)"
        if [ "$rc" != 0 ]; then
            printf 'FAIL\texit %s: %s(see %s)\n' "$rc" "${error:+$error }" "$short"
        elif [ "$nvidia" != 1 ]; then
            printf 'PASS\tno goal off an NVIDIA GPU, figures only: %s\n' "$table"
        elif [ -z "$rates" ]; then
            printf 'FAIL\tno D=128 N=8192 figure in the output, so the goal (%s TFLOP/s) went unchecked (see %s)\n' \
                "$attention_goal" "$short"
        elif [ -n "$below" ]; then
            printf 'MISSED\tunder %s TFLOP/s at d128, 8192 tokens: %s\n' "$attention_goal" "$below"
        else
            printf 'PASS\tat least %s TFLOP/s at d128, 8192 tokens: %s TFLOP/s\n' "$attention_goal" "$rates"
        fi
        ;;
    *)
        printf 'FAIL\tno such benchmark: %s\n' "$bench"
        ;;
    esac
}

# count_status TSV STATUS: how many steps of TSV have STATUS.
count_status() {
    awk -F '\t' -v s="$2" '$2 == s { n++ } END { print n + 0 }' "$1"
}

# summarize TSV: the run's summary line, each status counted, the failed and missed steps named.
summarize() {
    local pass missed fail skip names
    pass=$(count_status "$1" PASS)
    missed=$(count_status "$1" MISSED)
    fail=$(count_status "$1" FAIL)
    skip=$(count_status "$1" SKIP)
    printf '%s steps: %s passed, %s MISSED a goal, %s FAILED, %s skipped' \
        "$((pass + missed + fail + skip))" "$pass" "$missed" "$fail" "$skip"
    if [ "$fail" -gt 0 ]; then
        names="$(awk -F '\t' '$2 == "FAIL" { printf "%s%s", (n++ ? ", " : ""), $1 }' "$1")"
        printf '; failed: %s' "$names"
    fi
    if [ "$missed" -gt 0 ]; then
        names="$(awk -F '\t' '$2 == "MISSED" { printf "%s%s", (n++ ? ", " : ""), $1 }' "$1")"
        printf '; goals missed: %s' "$names"
    fi
    if [ "$fail" = 0 ] && [ "$missed" = 0 ]; then
        printf '; every step that ran passed'
    fi
    printf '\n'
}

# exit_status TSV: the run's exit status (see the top).
exit_status() {
    if [ "$(count_status "$1" FAIL)" -gt 0 ]; then
        echo 1
    elif [ "$(count_status "$1" MISSED)" -gt 0 ]; then
        echo 3
    else
        echo 0
    fi
}

case "${1:-}" in
--classify)
    if [ $# != 5 ]; then
        echo "usage: run.sh --classify gpu_bench|parity_bench|gemm RC NVIDIA LOG" >&2
        exit 64
    fi
    bench_status "$2" "$3" "$4" "$5"
    exit 0
    ;;
--summarize)
    if [ $# != 2 ]; then
        echo "usage: run.sh --summarize TSV" >&2
        exit 64
    fi
    summarize "$2"
    exit "$(exit_status "$2")"
    ;;
esac

here="$(cd "$(dirname "$0")" && pwd)"
bin="$here/bin"
logs="$here/logs"
rm -rf "$logs"
mkdir -p "$logs"

# The pack travels gzip-compressed, file by file (`xtask gpu-pack`): each NAME.gz becomes NAME
# here, executable, before anything runs.
for packed in "$bin"/*.gz "$here"/compute-sanitizer/*.gz; do
    [ -e "$packed" ] || continue
    if gzip -dc "$packed" > "${packed%.gz}.part" && mv "${packed%.gz}.part" "${packed%.gz}"; then
        chmod +x "${packed%.gz}"
        rm -f "$packed"
    else
        echo "run.sh: could not decompress $packed (gzip)" >&2
        exit 1
    fi
done
export OFFLOAD_EXAMPLES_DIR="$bin"
step_timeout="${OFFLOAD_PACK_STEP_TIMEOUT:-240}"
started=$(date +%s)

# ---- the machine ----------------------------------------------------------------------------
nvidia=0
amd=0
if [ "${OFFLOAD_DEVICE:-}" != "cpu" ]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        nvidia=1
    fi
    if [ -e /dev/kfd ] && { command -v rocminfo >/dev/null 2>&1 || [ -e /opt/rocm/lib/libamdhip64.so ]; }; then
        amd=1
    fi
fi
gpu="none"
driver="none"
cuda="none"
if [ "$nvidia" = 1 ]; then
    gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
    driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)"
    cuda="$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)"
    export OFFLOAD_GPU_TESTS=1
fi
if [ "$amd" = 1 ]; then
    amd_name="$(rocminfo 2>/dev/null | sed -n 's/^ *Marketing Name: *//p' | grep -v CPU | head -n 1)"
    if [ "$gpu" = "none" ]; then gpu="${amd_name:-AMD GPU}"; else gpu="$gpu; ${amd_name:-AMD GPU}"; fi
    export OFFLOAD_HIP_TESTS=1
fi
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
echo "gpu pack: $(cat "$here/MANIFEST.txt" 2>/dev/null | sed -n 's/^commit: /commit /p')"
echo "machine: gpu: $gpu; driver: $driver; CUDA: $cuda; cpu: ${cpu:-unknown}"
if [ "${OFFLOAD_DEVICE:-}" = "cpu" ]; then
    echo "OFFLOAD_DEVICE=cpu: the programs run on the CPU device; the GPU tests say why they skip"
else
    [ "$nvidia" = 1 ] || echo "not an NVIDIA machine: the CUDA tests skip, each saying so"
    [ "$amd" = 1 ] || echo "not an AMD machine: the HIP tests skip, each saying so"
fi

# ---- steps ----------------------------------------------------------------------------------
results="$logs/results.tsv"
: >"$results"

# record NAME STATUS SECONDS DETAIL
record() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$results"
    printf '%-44s %-6s %6ss  %s\n' "$1" "$2" "$3" "$4"
}

# record_bench NAME BENCH LOG: records the benchmark that just ran (rc, secs) as bench_status
# labels it.
record_bench() {
    local label
    label="$(bench_status "$2" "$rc" "$nvidia" "$3")"
    record "$1" "${label%%$'\t'*}" "$secs" "${label#*$'\t'}"
}

# timed LOG COMMAND...: runs the command into LOG; sets rc and secs.
timed() {
    timed_split "$1" "" "${@:2}"
}

# timed_split OUT ERR COMMAND...: the same with stdout into OUT and stderr into ERR (into OUT
# too where ERR is empty).
timed_split() {
    local out=$1 err=$2
    shift 2
    local t0 t1
    t0=$(date +%s.%N)
    if [ -n "$err" ]; then
        timeout "$step_timeout" "$@" >"$out" 2>"$err"
    else
        timeout "$step_timeout" "$@" >"$out" 2>&1
    fi
    rc=$?
    t1=$(date +%s.%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
}

# The lines of a program's stdout that must agree between devices, as a digest: stdout holds
# results; what differs by device (which image ran, a kernel only a GPU runs, the CPU device's
# notes) goes to `device:` and `image:` lines or to stderr.
digest_of() {
    grep -v -e '^device:' -e '^image:' "$1" | sha256sum | cut -c1-16
}

# Test binaries: libtest's summary; a skip line from every test that needs what is absent.
for t in gpu_cuda gpu_cuda_fault gpu_stream_fault gpu_fault_stress gpu_hip gpu_examples; do
    log="$logs/$t.log"
    timed "$log" "$bin/$t" --test-threads=1 --nocapture
    summary="$(grep -E '^test result:' "$log" | tail -n 1 | sed 's/^test result: //; s/; finished in.*//')"
    skips=$(grep -c 'skipped: ' "$log")
    detail="${summary:-no summary}"
    [ "$skips" -gt 0 ] && detail="$detail; $skips skipped (see logs/$t.log)"
    if [ "$rc" = 0 ]; then record "test $t" PASS "$secs" "$detail"; else record "test $t" FAIL "$secs" "exit $rc: $detail"; fi
done

# Programs: on the GPU (the runtime picks it) and on the CPU device; their outputs must agree.
# (`xtask gpu-pack` writes its list of programs in place of the word after `in`.)
for p in PACKED_PROGRAMS; do
    cpu_log="$logs/$p.cpu.log"
    OFFLOAD_DEVICE=cpu timed_split "$cpu_log" "$logs/$p.cpu.stderr.log" "$bin/$p"
    cpu_rc=$rc
    cpu_digest=$(digest_of "$cpu_log")
    if [ "$nvidia" = 1 ] || [ "$amd" = 1 ]; then
        gpu_log="$logs/$p.gpu.log"
        timed_split "$gpu_log" "$logs/$p.gpu.stderr.log" "$bin/$p"
        device="$(sed -n 's/^device: //p' "$gpu_log" | head -n 1)"
        gpu_digest=$(digest_of "$gpu_log")
        if [ "$rc" = 0 ] && [ "$cpu_rc" = 0 ] && [ "$gpu_digest" = "$cpu_digest" ]; then
            record "program $p" PASS "$secs" "on ${device:-?}: digest $gpu_digest, the CPU device's too"
        else
            record "program $p" FAIL "$secs" "on ${device:-?}: exit $rc, digest $gpu_digest; CPU device: exit $cpu_rc, digest $cpu_digest"
        fi
    else
        if [ "$cpu_rc" = 0 ]; then
            record "program $p" PASS "$secs" "CPU device: digest $cpu_digest"
        else
            record "program $p" FAIL "$secs" "CPU device: exit $cpu_rc (see logs/$p.cpu.log and $p.cpu.stderr.log)"
        fi
    fi
done

# A profile of saxpy, as `cargo offload profile` takes it (the pack holds no cargo to build
# with, so the profilers run on the packed program): on the CPU device the runtime's own record
# (OFFLOAD_PROFILE) must time each launch; on an NVIDIA GPU Nsight Systems' trace must list the
# kernel, on an AMD GPU rocprofv3's. A GPU without its profiler installed is a SKIP naming the
# package.
log="$logs/profile-saxpy.cpu.log"
record_file="$logs/profile-saxpy.cpu.jsonl"
rm -f "$record_file"
OFFLOAD_DEVICE=cpu OFFLOAD_PROFILE="$record_file" timed "$log" "$bin/saxpy"
timed_launches=$(grep -c '"kind":"launch","kernel":"saxpy".*"duration_ns":[0-9]' "$record_file" 2>/dev/null)
if [ "$rc" = 0 ] && [ "${timed_launches:-0}" -gt 0 ]; then
    record "profile saxpy (CPU device)" PASS "$secs" "$timed_launches launch(es) timed by offload-rt"
else
    record "profile saxpy (CPU device)" FAIL "$secs" "exit $rc, ${timed_launches:-0} timed launch(es) in logs/profile-saxpy.cpu.jsonl"
fi
if [ "$nvidia" = 1 ]; then
    nsys="$(command -v nsys || true)"
    [ -n "$nsys" ] || nsys=/usr/local/cuda/bin/nsys
    if [ ! -x "$nsys" ]; then
        record "profile saxpy (nsys)" SKIP 0 "Nsight Systems is not installed (Debian: nsight-systems)"
    else
        log="$logs/profile-saxpy.nsys.log"
        OFFLOAD_PROFILE="$logs/profile-saxpy.gpu.jsonl" timed "$log" "$nsys" profile --trace=cuda \
            --force-overwrite=true --stats=false -o "$logs/profile-saxpy" "$bin/saxpy"
        nsys_rc=$rc
        timed "$logs/profile-saxpy.trace.csv" "$nsys" stats --report cuda_gpu_trace --format csv \
            --force-export=true --output - "$logs/profile-saxpy.nsys-rep"
        listed=$(grep -c ',"\{0,1\}saxpy' "$logs/profile-saxpy.trace.csv")
        if [ "$nsys_rc" = 0 ] && [ "$rc" = 0 ] && [ "$listed" -gt 0 ]; then
            record "profile saxpy (nsys)" PASS "$secs" "$listed saxpy launch(es) in Nsight Systems' trace"
        else
            record "profile saxpy (nsys)" FAIL "$secs" "nsys exit $nsys_rc, stats exit $rc, $listed launch(es) (see logs/profile-saxpy.*)"
        fi
    fi
fi
if [ "$amd" = 1 ]; then
    rocprof="$(command -v rocprofv3 || true)"
    [ -n "$rocprof" ] || rocprof=/opt/rocm/bin/rocprofv3
    if [ ! -x "$rocprof" ]; then
        record "profile saxpy (rocprofv3)" SKIP 0 "rocprofv3 is not installed (ROCm: rocprofiler-sdk)"
    else
        log="$logs/profile-saxpy.rocprof.log"
        timed "$log" "$rocprof" --kernel-trace --output-format csv -d "$logs/profile-saxpy-rocprof" \
            -o run -- "$bin/saxpy"
        listed=$(cat "$logs"/profile-saxpy-rocprof/*/*kernel_trace.csv "$logs"/profile-saxpy-rocprof/*kernel_trace.csv 2>/dev/null | grep -c saxpy)
        if [ "$rc" = 0 ] && [ "$listed" -gt 0 ]; then
            record "profile saxpy (rocprofv3)" PASS "$secs" "$listed saxpy launch(es) in rocprofv3's kernel trace"
        else
            record "profile saxpy (rocprofv3)" FAIL "$secs" "exit $rc, $listed launch(es) (see logs/profile-saxpy.rocprof.log)"
        fi
    fi
fi

# The programs under NVIDIA's compute-sanitizer: no memory error and no failed API call in what
# the runtime and the kernels do on the GPU (memcheck, every fixture kernel included), no
# shared-memory race or barrier misuse in the barrier kernels (racecheck, synccheck), no read of
# device memory never written (initcheck). A sanitizer older than the driver's CUDA release
# cannot instrument a program, so the machine's own (its CUDA toolkit's) comes first; else the
# one the pack carries, with its libraries on the loader's path (one needs another by name).
sanitizer="$(command -v compute-sanitizer || true)"
[ -n "$sanitizer" ] || sanitizer=/usr/local/cuda/bin/compute-sanitizer
sanitize=("$sanitizer")
if [ ! -x "$sanitizer" ]; then
    sanitizer="$here/compute-sanitizer/compute-sanitizer"
    sanitize=(env "LD_LIBRARY_PATH=$here/compute-sanitizer${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        "$sanitizer" --injection-path "$here/compute-sanitizer")
fi
if [ "$nvidia" = 1 ] && [ -x "$sanitizer" ]; then
    echo "compute-sanitizer: $sanitizer ($("${sanitize[@]}" --version 2>/dev/null | grep -m 1 Version))"
fi
for check in "memcheck saxpy" "memcheck reduce" "memcheck offload-rt-kernel-run" \
    "racecheck reduce" "synccheck reduce" "initcheck saxpy"; do
    tool=${check%% *}
    p=${check#* }
    if [ "$nvidia" != 1 ]; then
        record "sanitize $tool $p" SKIP 0 "not an NVIDIA machine"
        continue
    fi
    if [ ! -x "$sanitizer" ]; then
        record "sanitize $tool $p" SKIP 0 "neither the machine nor the pack has compute-sanitizer"
        continue
    fi
    log="$logs/sanitize-$tool-$p.log"
    timed "$log" "${sanitize[@]}" --tool "$tool" --error-exitcode 1 "$bin/$p"
    summary="$(grep -m 1 -e 'ERROR SUMMARY' -e 'RACECHECK SUMMARY' "$log" | sed 's/^=* *//')"
    if [ "$rc" = 0 ] && [ -n "$summary" ]; then
        record "sanitize $tool $p" PASS "$secs" "$summary"
    else
        record "sanitize $tool $p" FAIL "$secs" "exit $rc: ${summary:-no summary} (see logs/sanitize-$tool-$p.log)"
    fi
done

# Every fixture kernel, one line each, from the GPU run (else the CPU device's).
kernel_log="$logs/offload-rt-kernel-run.gpu.log"
[ -f "$kernel_log" ] || kernel_log="$logs/offload-rt-kernel-run.cpu.log"
while IFS= read -r line; do
    case "$line" in
    device:* | image:* | "") continue ;;
    esac
    name="${line%%:*}"
    what="${line#*: }"
    case "$line" in
    *WRONG*) record "kernel $name" FAIL 0 "$what" ;;
    *) record "kernel $name" PASS 0 "$what" ;;
    esac
done <"$kernel_log"

# The print and panic modes of offload-rt-kernel-run, on the device the runtime picks: the
# device's lines reach stdout, and a kernel's panic comes back as an error with its message.
for mode in print copy-past-the-end lookup-past-the-table panic-everywhere; do
    log="$logs/kernel-run-$mode.log"
    timed "$log" "$bin/offload-rt-kernel-run" "$mode"
    case "$mode" in
    print) want=0 need="--- print_then_panic" ;;
    copy-past-the-end) want=1 need="index out of bounds: the len is 100 but the index is 100" ;;
    panic-everywhere) want=1 need="index out of bounds: the len is 4 but the index is" ;;
    *) want=1 need="index out of bounds" ;;
    esac
    said="$(grep -m 1 -e 'panicked' "$log" | cut -c1-140)"
    if [ "$rc" = "$want" ] && grep -q -F -e "$need" "$log"; then
        record "mode $mode" PASS "$secs" "exit $rc; ${said:-$need}"
    else
        record "mode $mode" FAIL "$secs" "exit $rc (expected $want, and \"$need\"; see logs/kernel-run-$mode.log)"
    fi
done

# `--offload-arch native`: the architectures the real drivers report, each GPU's among them.
log="$logs/native-archs.log"
timed "$log" "$bin/offload-rt-kernel-run" native-archs
native="$(sed -n 's/^native: //p' "$log")"
if [ "$rc" != 0 ]; then
    record "native archs" FAIL "$secs" "exit $rc (see logs/native-archs.log)"
elif [ "$nvidia" = 1 ] && ! printf '%s' "$native" | grep -q 'sm_'; then
    record "native archs" FAIL "$secs" "no sm_ among \"$native\" on an NVIDIA machine"
elif [ "$amd" = 1 ] && ! printf '%s' "$native" | grep -q 'gfx'; then
    record "native archs" FAIL "$secs" "no gfx among \"$native\" on an AMD machine"
else
    record "native archs" PASS "$secs" "native = ${native:-none} ($(grep -c '^unavailable' "$log") driver(s) without a device)"
fi

# The collectives on one GPU: a one-rank communicator of NCCL (RCCL on AMD), every call after
# a kernel on the same stream; exit 2 where the machine has no such library.
log="$logs/collectives.log"
timed "$log" "$bin/offload-rt-kernel-run" collectives
case "$rc" in
0) record "collectives" PASS "$secs" "$(grep -m 1 '^collectives:' "$log" | cut -c1-120); every result the kernel's" ;;
2) record "collectives" SKIP "$secs" "$(grep -m 1 '^skipped:' "$log" | cut -c1-200)" ;;
*) record "collectives" FAIL "$secs" "exit $rc: $(grep -m 1 -e WRONG -e '^error' "$log" | cut -c1-160) (see logs/collectives.log)" ;;
esac

# Each kind of panic core raises, one process each: its report names the thread and keeps the
# part of the message a GPU records (the CPU device has the full message).
kinds=(
    "index out of bounds: the len is 64 but the index is 69"
    "no value past the end"
    "values differ"
    "attempt to divide by zero"
    "panicked"
    "called \`Result::unwrap()\` on an \`Err\` value"
    "slice index starts at 7 but ends at 6"
    "a literal message"
)
for kind in 1 2 3 4 5 6 7 8; do
    log="$logs/panic-kind-$kind.log"
    timed "$log" "$bin/offload-rt-kernel-run" panic-kind "$kind"
    need="${kinds[$((kind - 1))]}"
    said="$(grep -m 1 -e 'panicked' "$log" | cut -c1-160)"
    if [ "$rc" = 1 ] && grep -q -F -e "$need" "$log" && grep -q -F -e "thread (5, 0, 0)" "$log"; then
        record "panic kind $kind" PASS "$secs" "$said"
    else
        record "panic kind $kind" FAIL "$secs" "exit $rc (expected 1, thread (5, 0, 0) and \"$need\"; see logs/panic-kind-$kind.log)"
    fi
done

# Benchmarks: the figures go into results.md; each labelled by bench_status (above).
log="$logs/gpu_bench.log"
timed "$log" "$bin/gpu_bench"
record_bench "bench gpu_bench" gpu_bench "$log"

log="$logs/parity_bench.log"
timed "$log" "$bin/parity_bench" "$here/parity"
record_bench "bench parity_bench" parity_bench "$log"

# The GEMM example on the matrix units against cuBLAS's GemmEx (f16 in, f32 accumulation) at
# 4096³ and 8192³; on a machine without a GPU, the CPU device against a host loop.
log="$logs/gemm_bench.log"
if [ "$nvidia" = 1 ] || [ "$amd" = 1 ]; then
    timed "$log" "$bin/gemm" --bench
else
    OFFLOAD_DEVICE=cpu timed "$log" "$bin/gemm" --bench 256
fi
record_bench "bench gemm" gemm "$log"

# The attention example's forward pass over 1k-16k tokens (both head dimensions, causal and
# not); on a machine without a GPU, the CPU device at 256.
log="$logs/attention_bench.log"
if [ "$nvidia" = 1 ] || [ "$amd" = 1 ]; then
    timed "$log" "$bin/attention" --bench
else
    OFFLOAD_DEVICE=cpu timed "$log" "$bin/attention" --bench 256
fi
record_bench "bench attention" attention "$log"

# ---- results --------------------------------------------------------------------------------
total=$(($(date +%s) - started))
summary="$(summarize "$results")"
exit_code=$(exit_status "$results")
json_escape() {
    sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/ /g' | tr -d '\n'
}
{
    printf '{\n  "machine": {"gpu": "%s", "driver": "%s", "cuda": "%s", "cpu": "%s", "offload_device": "%s"},\n' \
        "$(printf '%s' "$gpu" | json_escape)" "$(printf '%s' "$driver" | json_escape)" \
        "$(printf '%s' "$cuda" | json_escape)" "$(printf '%s' "$cpu" | json_escape)" \
        "$(printf '%s' "${OFFLOAD_DEVICE:-}" | json_escape)"
    printf '  "seconds": %s,\n  "passed": %s,\n  "missed": %s,\n  "failed": %s,\n  "skipped": %s,\n  "exit": %s,\n  "summary": "%s",\n  "steps": [\n' \
        "$total" "$(count_status "$results" PASS)" "$(count_status "$results" MISSED)" \
        "$(count_status "$results" FAIL)" "$(count_status "$results" SKIP)" "$exit_code" \
        "$(printf '%s' "$summary" | json_escape)"
    first=1
    while IFS=$'\t' read -r name status secs detail; do
        [ "$first" = 1 ] || printf ',\n'
        first=0
        printf '    {"name": "%s", "status": "%s", "seconds": %s, "detail": "%s"}' \
            "$(printf '%s' "$name" | json_escape)" "$status" "$secs" "$(printf '%s' "$detail" | json_escape)"
    done <"$results"
    printf '\n  ]\n}\n'
} >"$here/results.json"
{
    echo "# GPU pack results"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- $(sed -n 's/^commit: /commit: /p' "$here/MANIFEST.txt" 2>/dev/null)"
    echo "- GPU: $gpu; driver: $driver; CUDA: $cuda"
    echo "- CPU: ${cpu:-unknown}; OFFLOAD_DEVICE: ${OFFLOAD_DEVICE:-unset}"
    echo "- $summary; ${total} s in all"
    echo
    echo "| step | status | seconds | detail |"
    echo "|---|---|---:|---|"
    while IFS=$'\t' read -r name status secs detail; do
        echo "| $name | $status | $secs | ${detail//|/\\|} |"
    done <"$results"
    echo
    for b in gpu_bench parity_bench gemm_bench; do
        echo
        echo "## $b"
        echo
        echo '```'
        cat "$logs/$b.log"
        echo '```'
    done
} >"$here/results.md"

echo
echo "$summary"
echo "${total} s; results.json and results.md in $here; exit status $exit_code"
exit "$exit_code"
