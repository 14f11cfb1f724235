/* The OpenMP peer of `benches/cpu-barriers`: the same cases (tiled matrix product, n = 512 and
 * 1024; sum of 2^24 u32s; tiled transpose and 5-point stencil of 4096 x 4096 floats; 7-point
 * stencil of 256^3 floats; 256-bin histogram of 2^24 words; SAXPY of 2^24 floats, every round
 * on the previous round's y) on the same inputs, with the same
 * order of float operations, so that every output has the same bits and the same FNV-1a 64
 * digest. Warm-up once, then ROUNDS rounds (the 1024 matrix product at
 * most 3); one line per case in the Rust program's format.
 *
 *   clang-22 -O3 -fopenmp -ffp-contract=off benches/peers/barriers_openmp.c -o barriers_openmp
 *   OMP_NUM_THREADS=2 ./barriers_openmp [ROUNDS]
 */
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TILE 16 /* matmul and stencil blocks in the Rust kernels */
#define TT 32   /* transpose tile */

/* The same 32-bit hash as `hash` in benches/cpu-barriers/src/main.rs. */
static uint32_t hash(uint32_t i, uint32_t seed) {
    uint32_t x = (i * 0x9e3779b1u) ^ (seed * 0x85ebca6bu);
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    x *= 0x297a2d39u;
    return x ^ (x >> 15);
}

/* A value in [-0.5, 0.5) with 10 significant bits: exact, so the same as the Rust side. */
static float input_f32(uint32_t i, uint32_t seed) { return (float)(hash(i, seed) >> 22) / 1024.0f - 0.5f; }

static uint64_t fnv1a64(const void *p, size_t len) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *name, const char *size, int rounds, double ms, const void *p, size_t len) {
    printf("%s %s rounds=%d median_ms=%.2f digest=%016llx\n", name, size, rounds, ms,
           (unsigned long long)fnv1a64(p, len));
    fflush(stdout);
}

/* c = a . b, n x n row-major, n a multiple of 16: 16 x 16 output tiles, each built from
 * 16 x 16 tiles of a and b copied locally, as in the kernel. Per output element the sum is
 * acc += a[row][k] * b[k][col] for k = 0 .. n-1 in order, from 0: the kernel's order. The
 * simd loop runs across the columns of the tile (different elements), not across k. */
static void matmul(int n, const float *restrict a, const float *restrict b, float *restrict c) {
    int nt = n / TILE;
#pragma omp parallel for collapse(2) schedule(static)
    for (int bi = 0; bi < nt; bi++) {
        for (int bj = 0; bj < nt; bj++) {
            float as[TILE][TILE], bs[TILE][TILE], acc[TILE][TILE];
            memset(acc, 0, sizeof acc);
            for (int s = 0; s < nt; s++) {
                for (int y = 0; y < TILE; y++) {
#pragma omp simd
                    for (int x = 0; x < TILE; x++) {
                        as[y][x] = a[(size_t)(bi * TILE + y) * n + s * TILE + x];
                        bs[y][x] = b[(size_t)(s * TILE + y) * n + bj * TILE + x];
                    }
                }
                for (int y = 0; y < TILE; y++) {
                    for (int k = 0; k < TILE; k++) {
                        float av = as[y][k];
#pragma omp simd
                        for (int x = 0; x < TILE; x++) acc[y][x] += av * bs[k][x];
                    }
                }
            }
            for (int y = 0; y < TILE; y++) {
#pragma omp simd
                for (int x = 0; x < TILE; x++) c[(size_t)(bi * TILE + y) * n + bj * TILE + x] = acc[y][x];
            }
        }
    }
}

/* Integer sum: any order gives the same u64. */
static uint64_t reduce(size_t n, const uint32_t *restrict in) {
    uint64_t sum = 0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
    for (size_t i = 0; i < n; i++) sum += in[i];
    return sum;
}

/* y += a * x, the multiply rounded before the add (no contraction). */
static void saxpy(size_t n, float a, const float *restrict x, float *restrict y) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

/* out (cols x rows) = in (rows x cols) transposed, 32 x 32 tiles. */
static void transpose(int rows, int cols, const float *restrict in, float *restrict out) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int tr = 0; tr < rows; tr += TT) {
        for (int tc = 0; tc < cols; tc += TT) {
            int rmax = tr + TT < rows ? tr + TT : rows, cmax = tc + TT < cols ? tc + TT : cols;
            for (int c = tc; c < cmax; c++) {
#pragma omp simd
                for (int r = tr; r < rmax; r++) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
            }
        }
    }
}

/* 5-point stencil: interior cells 0.2f * ((((centre + left) + right) + up) + down), the
 * kernel's order; the first and last row and column copied. */
static void stencil(int n, const float *restrict in, float *restrict out) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        const float *row = in + (size_t)r * n;
        float *o = out + (size_t)r * n;
        if (r == 0 || r == n - 1) {
            memcpy(o, row, n * sizeof(float));
            continue;
        }
        o[0] = row[0];
#pragma omp simd
        for (int c = 1; c < n - 1; c++)
            o[c] = 0.2f * ((((row[c] + row[c - 1]) + row[c + 1]) + row[c - n]) + row[c + n]);
        o[n - 1] = row[n - 1];
    }
}

/* 7-point stencil on an n^3 grid (x fastest): interior cells
 * 0.125f * ((((((2.0f * centre + west) + east) + north) + south) + below) + above), the
 * faces copied. */
static void stencil7(int n, const float *restrict in, float *restrict out) {
    size_t plane = (size_t)n * n;
#pragma omp parallel for collapse(2) schedule(static)
    for (int z = 0; z < n; z++) {
        for (int y = 0; y < n; y++) {
            size_t base = (size_t)z * plane + (size_t)y * n;
            const float *row = in + base;
            float *o = out + base;
            if (z == 0 || z == n - 1 || y == 0 || y == n - 1) {
                memcpy(o, row, n * sizeof(float));
                continue;
            }
            o[0] = row[0];
#pragma omp simd
            for (int x = 1; x < n - 1; x++)
                o[x] = 0.125f * ((((((2.0f * row[x] + row[x - 1]) + row[x + 1]) + row[x - n]) + row[x + n]) +
                                  row[x - (ptrdiff_t)plane]) + row[x + plane]);
            o[n - 1] = row[n - 1];
        }
    }
}

/* 256-bin histogram of the words' low bytes: a private histogram per thread, then summed. */
static void histogram(size_t n, const uint32_t *restrict data, uint32_t *restrict bins) {
    memset(bins, 0, 256 * sizeof(uint32_t));
#pragma omp parallel
    {
        uint32_t local[256] = {0};
#pragma omp for schedule(static)
        for (size_t i = 0; i < n; i++) local[data[i] & 0xff]++;
        for (int b = 0; b < 256; b++) {
            if (local[b]) {
#pragma omp atomic
                bins[b] += local[b];
            }
        }
    }
}

static double *times;

#define MEDIAN_MS(rounds, body)                                                                    \
    ({                                                                                             \
        body;                                                                                      \
        for (int r_ = 0; r_ < (rounds); r_++) {                                                    \
            double t_ = now_ms();                                                                  \
            body;                                                                                  \
            times[r_] = now_ms() - t_;                                                             \
        }                                                                                          \
        qsort(times, (rounds), sizeof(double), cmp_double);                                        \
        times[(rounds) / 2];                                                                       \
    })

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1) rounds = 1;
    times = malloc(rounds * sizeof(double));
    printf("# barriers_openmp, %d OpenMP threads, %d rounds\n", omp_get_max_threads(), rounds);
    char size[64];

    for (int n = 512; n <= 1024; n *= 2) {
        int r = n == 1024 && rounds > 3 ? 3 : rounds;
        size_t len = (size_t)n * n;
        float *a = malloc(len * sizeof(float)), *b = malloc(len * sizeof(float)), *c = malloc(len * sizeof(float));
        for (uint32_t i = 0; i < len; i++) { a[i] = input_f32(i, 1); b[i] = input_f32(i, 2); }
        double ms = MEDIAN_MS(r, matmul(n, a, b, c));
        snprintf(size, sizeof size, "%dx%d", n, n);
        report("matmul", size, r, ms, c, len * sizeof(float));
        free(a); free(b); free(c);
    }

    {
        size_t n = (size_t)1 << 24;
        uint32_t *in = malloc(n * sizeof(uint32_t));
        for (uint32_t i = 0; i < n; i++) in[i] = hash(i, 3) % 1000;
        uint64_t total = 0;
        double ms = MEDIAN_MS(rounds, total = reduce(n, in));
        snprintf(size, sizeof size, "n=%zu", n);
        report("reduce", size, rounds, ms, &total, sizeof total); /* little-endian u64, as in Rust */
        free(in);
    }

    {
        int rows = 4096, cols = 4096;
        size_t len = (size_t)rows * cols;
        float *in = malloc(len * sizeof(float)), *out = malloc(len * sizeof(float));
        for (uint32_t i = 0; i < len; i++) in[i] = input_f32(i, 4);
        double ms = MEDIAN_MS(rounds, transpose(rows, cols, in, out));
        snprintf(size, sizeof size, "%dx%d", rows, cols);
        report("transpose", size, rounds, ms, out, len * sizeof(float));
        free(in); free(out);
    }

    {
        int n = 4096;
        size_t len = (size_t)n * n;
        float *in = malloc(len * sizeof(float)), *out = malloc(len * sizeof(float));
        for (uint32_t i = 0; i < len; i++) in[i] = input_f32(i, 5);
        double ms = MEDIAN_MS(rounds, stencil(n, in, out));
        snprintf(size, sizeof size, "%dx%d", n, n);
        report("stencil5", size, rounds, ms, out, len * sizeof(float));
        free(in); free(out);
    }

    {
        int n = 256;
        size_t len = (size_t)n * n * n;
        float *in = malloc(len * sizeof(float)), *out = malloc(len * sizeof(float));
        for (uint32_t i = 0; i < len; i++) in[i] = input_f32(i, 6);
        double ms = MEDIAN_MS(rounds, stencil7(n, in, out));
        snprintf(size, sizeof size, "%dx%dx%d", n, n, n);
        report("stencil7", size, rounds, ms, out, len * sizeof(float));
        free(in); free(out);
    }

    {
        size_t n = (size_t)1 << 24;
        uint32_t *data = malloc(n * sizeof(uint32_t)), bins[256];
        for (uint32_t i = 0; i < n; i++) data[i] = hash(i, 7);
        double ms = MEDIAN_MS(rounds, histogram(n, data, bins));
        snprintf(size, sizeof size, "n=%zu", n);
        report("histogram", size, rounds, ms, bins, sizeof bins); /* little-endian u32s */
        free(data);
    }

    {
        size_t n = (size_t)1 << 24;
        float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
        for (uint32_t i = 0; i < n; i++) { x[i] = input_f32(i, 8); y[i] = input_f32(i, 9); }
        double ms = MEDIAN_MS(rounds, saxpy(n, 2.5f, x, y));
        snprintf(size, sizeof size, "n=%zu", n);
        report("saxpy", size, rounds, ms, y, n * sizeof(float));
        free(x); free(y);
    }
    free(times);
    return 0;
}
