/* The OpenMP peer of `benches/cpu-samples`: the same twelve cases (reduce5, sum_and_max,
 * prescan, shfl_scan, histogram256, jacobi5, hotspot, transpose, matrix_mul, nbody, kmeans,
 * bitonic_sort) on the same inputs and sizes, computed as a C programmer writes them for the
 * CPU, with the same order of float operations per output element, so that every output has
 * the same bits and the same FNV-1a 64 digest (of the outputs' bytes one after another).
 * Warm-up once, then ROUNDS rounds; one line per case in the Rust program's format.
 *
 *   clang-22 -O3 -fopenmp -ffp-contract=off benches/peers/samples_openmp.c -lm -o samples_openmp
 *   OMP_NUM_THREADS=2 ./samples_openmp [ROUNDS] [small|full]   # the size defaults to $SIZE
 */
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The same 32-bit hash as `hash` in benches/cpu-samples/src/main.rs. */
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

#define FNV_OFFSET 0xcbf29ce484222325ull

static uint64_t fnv1a64(uint64_t h, const void *p, size_t len) {
    const unsigned char *b = p;
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

static int rounds;
static double *times;

/* `h` is the digest of the case's outputs (little-endian bytes, as the Rust side). */
static void report(const char *name, const char *size, double ms, uint64_t h) {
    printf("%s %s rounds=%d median_ms=%.2f digest=%016llx\n", name, size, rounds, ms, (unsigned long long)h);
    fflush(stdout);
}

#define MEDIAN_MS(body)                                                                            \
    ({                                                                                             \
        body;                                                                                      \
        for (int r_ = 0; r_ < rounds; r_++) {                                                      \
            double t_ = now_ms();                                                                  \
            body;                                                                                  \
            times[r_] = now_ms() - t_;                                                             \
        }                                                                                          \
        qsort(times, rounds, sizeof(double), cmp_double);                                          \
        times[rounds / 2];                                                                         \
    })

/* Block b's sum of in[b * 512 ..][.. 512] (the kernel's blocks of 256 threads, 2 elements each). */
static void reduce5(size_t n, const uint32_t *restrict in, uint32_t *restrict out) {
    size_t blocks = (n + 511) / 512;
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < blocks; b++) {
        size_t end = (b + 1) * 512 < n ? (b + 1) * 512 : n;
        uint32_t s = 0;
#pragma omp simd reduction(+ : s)
        for (size_t i = b * 512; i < end; i++) s += in[i];
        out[b] = s;
    }
}

/* Block b of 64 visits the runs of 256 words starting at (r * 64 + b) * 256. */
static void sum_and_max(size_t n, const uint32_t *restrict in, uint64_t *restrict sums, uint32_t *restrict maxima) {
#pragma omp parallel for schedule(static)
    for (int b = 0; b < 64; b++) {
        uint64_t s = 0;
        uint32_t m = 0;
        for (size_t run = (size_t)b * 256; run < n; run += 64 * 256) {
#pragma omp simd reduction(+ : s) reduction(max : m)
            for (size_t i = run; i < run + 256; i++) {
                s += in[i];
                m = in[i] > m ? in[i] : m;
            }
        }
        sums[b] = s;
        maxima[b] = m;
    }
}

/* Each block of 1024: exclusive scan, and its total. */
static void prescan(size_t n, const uint32_t *restrict in, uint32_t *restrict out, uint32_t *restrict totals) {
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < n / 1024; b++) {
        uint32_t acc = 0;
        for (size_t i = b * 1024; i < (b + 1) * 1024; i++) {
            out[i] = acc;
            acc += in[i];
        }
        totals[b] = acc;
    }
}

/* Each block of 256: inclusive scan, and its total. */
static void shfl_scan(size_t n, const uint32_t *restrict in, uint32_t *restrict out, uint32_t *restrict totals) {
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < n / 256; b++) {
        uint32_t acc = 0;
        for (size_t i = b * 256; i < (b + 1) * 256; i++) {
            acc += in[i];
            out[i] = acc;
        }
        totals[b] = acc;
    }
}

/* The four bytes of each word into 256 bins: a private histogram per thread, then summed. */
static void histogram256(size_t n, const uint32_t *restrict data, uint32_t *restrict bins) {
    memset(bins, 0, 256 * sizeof(uint32_t));
#pragma omp parallel
    {
        uint32_t local[256] = {0};
#pragma omp for schedule(static)
        for (size_t i = 0; i < n; i++) {
            uint32_t w = data[i];
            local[w & 0xff]++;
            local[(w >> 8) & 0xff]++;
            local[(w >> 16) & 0xff]++;
            local[w >> 24]++;
        }
        for (int b = 0; b < 256; b++) {
            if (local[b]) {
#pragma omp atomic
                bins[b] += local[b];
            }
        }
    }
}

/* Interior cells 0.25f * (((up + left) + right) + down); the border copied. */
static void jacobi5(int n, const float *restrict in, float *restrict out) {
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
        for (int c = 1; c < n - 1; c++) o[c] = 0.25f * (((row[c - n] + row[c - 1]) + row[c + 1]) + row[c + n]);
        o[n - 1] = row[n - 1];
    }
}

/* Rodinia's constants, in double, rounded to float: cap, rx, ry, rz, step. */
static void hotspot_constants(int rows, int cols, float k[5]) {
    double t_chip = 0.0005, chip_height = 0.016, chip_width = 0.016, factor_chip = 0.5, spec_heat_si = 1.75e6,
           k_si = 100.0, max_pd = 3.0e6, precision = 0.001;
    double grid_height = chip_height / rows, grid_width = chip_width / cols;
    double cap = factor_chip * spec_heat_si * t_chip * grid_width * grid_height;
    double rx = grid_width / (2.0 * k_si * t_chip * grid_height);
    double ry = grid_height / (2.0 * k_si * t_chip * grid_width);
    double rz = t_chip / (k_si * grid_height * grid_width);
    double max_slope = max_pd / (factor_chip * t_chip * spec_heat_si);
    double step = precision / max_slope;
    k[0] = (float)cap, k[1] = (float)rx, k[2] = (float)ry, k[3] = (float)rz, k[4] = (float)step;
}

/* One step of Rodinia's stencil over the grid; a neighbour past the edge is the cell itself. */
static void hotspot_step(int n, const float k[4], const float *restrict power, const float *restrict src,
                         float *restrict dst) {
    float step_div_cap = k[0], rx_1 = k[1], ry_1 = k[2], rz_1 = k[3];
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        const float *row = src + (size_t)r * n;
        const float *north = src + (size_t)(r > 0 ? r - 1 : 0) * n;
        const float *south = src + (size_t)(r < n - 1 ? r + 1 : n - 1) * n;
        const float *p = power + (size_t)r * n;
        float *o = dst + (size_t)r * n;
        for (int c = 0; c < n; c++) {
            float t = row[c], e = row[c < n - 1 ? c + 1 : n - 1], w = row[c > 0 ? c - 1 : 0];
            o[c] = t + step_div_cap * (p[c] + (south[c] + north[c] - 2.0f * t) * ry_1 + (e + w - 2.0f * t) * rx_1 +
                                       (80.0f - t) * rz_1);
        }
    }
}

/* out (width x height) = in (height x width) transposed, 32 x 32 tiles. */
static void transpose(int height, int width, const float *restrict in, float *restrict out) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int tr = 0; tr < height; tr += 32) {
        for (int tc = 0; tc < width; tc += 32) {
            for (int c = tc; c < tc + 32; c++) {
#pragma omp simd
                for (int r = tr; r < tr + 32; r++) out[(size_t)c * height + r] = in[(size_t)r * width + c];
            }
        }
    }
}

/* c = a . b, row by row, k outside j: each element adds its products in k order from 0. */
static void matrix_mul(int n, const float *restrict a, const float *restrict b, float *restrict c) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *row = c + (size_t)i * n;
        memset(row, 0, n * sizeof(float));
        for (int k = 0; k < n; k++) {
            float aik = a[(size_t)i * n + k];
            const float *bk = b + (size_t)k * n;
#pragma omp simd
            for (int j = 0; j < n; j++) row[j] += aik * bk[j];
        }
    }
}

/* accel[i] = sum over j in order of m_j r s, r = p_j - p_i, s = (1 / sqrt(|r|^2 + 0.01))^3. */
static void nbody(int n, const float *restrict pos, float *restrict accel) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const float *bi = pos + 4 * (size_t)i;
        float ax = 0.0f, ay = 0.0f, az = 0.0f;
        for (int j = 0; j < n; j++) {
            const float *bj = pos + 4 * (size_t)j;
            float rx = bj[0] - bi[0], ry = bj[1] - bi[1], rz = bj[2] - bi[2];
            float dist_sqr = rx * rx + ry * ry + rz * rz + 0.01f;
            float inv_dist = 1.0f / sqrtf(dist_sqr);
            float s = bj[3] * (inv_dist * inv_dist * inv_dist);
            ax = ax + rx * s;
            ay = ay + ry * s;
            az = az + rz * s;
        }
        accel[4 * (size_t)i] = ax, accel[4 * (size_t)i + 1] = ay, accel[4 * (size_t)i + 2] = az;
        accel[4 * (size_t)i + 3] = 0.0f;
    }
}

/* Nearest of 16 centroids (4 integer coordinates) per point, and per block of 256 points the
 * coordinate sums (16 x 4) and counts (16) of its points per cluster. */
static void kmeans(size_t n, const int32_t *restrict points, const int32_t *restrict centroids,
                   uint32_t *restrict membership, int32_t *restrict sums, uint32_t *restrict counts) {
    size_t blocks = (n + 255) / 256;
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < blocks; b++) {
        int32_t *s = sums + b * 64;
        uint32_t *c = counts + b * 16;
        memset(s, 0, 64 * sizeof(int32_t));
        memset(c, 0, 16 * sizeof(uint32_t));
        size_t end = (b + 1) * 256 < n ? (b + 1) * 256 : n;
        for (size_t i = b * 256; i < end; i++) {
            const int32_t *p = points + 4 * i;
            int best = 0;
            int32_t best_d = INT32_MAX;
            for (int k = 0; k < 16; k++) {
                int32_t d = 0;
                for (int j = 0; j < 4; j++) {
                    int32_t diff = p[j] - centroids[4 * k + j];
                    d += diff * diff;
                }
                if (d < best_d) best = k, best_d = d;
            }
            membership[i] = (uint32_t)best;
            for (int j = 0; j < 4; j++) s[4 * best + j] += p[j];
            c[best]++;
        }
    }
}

/* Each block of 1024 key-value pairs sorted by the samples' bitonic network, run in turn. */
static void bitonic(size_t n, const uint32_t *restrict src_key, const uint32_t *restrict src_val,
                    uint32_t *restrict dst_key, uint32_t *restrict dst_val) {
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < n / 1024; b++) {
        uint32_t *k = dst_key + b * 1024, *v = dst_val + b * 1024;
        memcpy(k, src_key + b * 1024, 1024 * sizeof(uint32_t));
        memcpy(v, src_val + b * 1024, 1024 * sizeof(uint32_t));
        for (unsigned size = 2; size <= 1024; size <<= 1) {
            for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
                for (unsigned t = 0; t < 512; t++) {
                    int dir = size == 1024 ? 1 : 1 ^ ((t & (size / 2)) != 0);
                    unsigned pos = 2 * t - (t & (stride - 1));
                    if ((k[pos] > k[pos + stride]) == dir) {
                        uint32_t tk = k[pos], tv = v[pos];
                        k[pos] = k[pos + stride], v[pos] = v[pos + stride];
                        k[pos + stride] = tk, v[pos + stride] = tv;
                    }
                }
            }
        }
    }
}

#define U64(x) ((uint64_t)(x))

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1) rounds = 1;
    const char *size_name = argc > 2 ? argv[2] : getenv("SIZE");
    if (!size_name) size_name = "full";
    int full = strcmp(size_name, "full") == 0;
    if (!full && strcmp(size_name, "small") != 0) {
        fprintf(stderr, "size small|full, not %s\n", size_name);
        return 2;
    }
#define PICK(small, large) (full ? (large) : (small))
    times = malloc(rounds * sizeof(double));
    printf("# samples_openmp, %d OpenMP threads, size %s, %d rounds\n", omp_get_max_threads(), size_name, rounds);
    char size[64];

    {
        size_t n = PICK(1u << 20, 1u << 24), blocks = (n + 511) / 512;
        uint32_t *in = malloc(n * 4), *out = malloc(blocks * 4);
        for (uint32_t i = 0; i < n; i++) in[i] = hash(i, 11) % 1000;
        double ms = MEDIAN_MS(reduce5(n, in, out));
        snprintf(size, sizeof size, "n=%zu", n);
        report("reduce5", size, ms, fnv1a64(FNV_OFFSET, out, blocks * 4));
        free(in), free(out);
    }
    {
        size_t n = PICK(1u << 22, 1u << 24);
        uint32_t *in = malloc(n * 4), maxima[64];
        uint64_t sums[64];
        for (uint32_t i = 0; i < n; i++) in[i] = hash(i, 12);
        double ms = MEDIAN_MS(sum_and_max(n, in, sums, maxima));
        snprintf(size, sizeof size, "n=%zu", n);
        report("sum_and_max", size, ms, fnv1a64(fnv1a64(FNV_OFFSET, sums, sizeof sums), maxima, sizeof maxima));
        free(in);
    }
    {
        size_t n = PICK(1u << 19, 1u << 21);
        uint32_t *in = malloc(n * 4), *out = malloc(n * 4), *totals = malloc(n / 1024 * 4);
        for (uint32_t i = 0; i < n; i++) in[i] = hash(i, 13) % 1000;
        double ms = MEDIAN_MS(prescan(n, in, out, totals));
        snprintf(size, sizeof size, "n=%zu", n);
        report("prescan", size, ms, fnv1a64(fnv1a64(FNV_OFFSET, out, n * 4), totals, n / 1024 * 4));
        free(in), free(out), free(totals);
    }
    {
        size_t n = PICK(1u << 20, 1u << 24);
        uint32_t *in = malloc(n * 4), *out = malloc(n * 4), *totals = malloc(n / 256 * 4);
        for (uint32_t i = 0; i < n; i++) in[i] = hash(i, 14) % 1000;
        double ms = MEDIAN_MS(shfl_scan(n, in, out, totals));
        snprintf(size, sizeof size, "n=%zu", n);
        report("shfl_scan", size, ms, fnv1a64(fnv1a64(FNV_OFFSET, out, n * 4), totals, n / 256 * 4));
        free(in), free(out), free(totals);
    }
    {
        size_t n = PICK(1u << 22, 1u << 24);
        uint32_t *data = malloc(n * 4), bins[256];
        for (uint32_t i = 0; i < n; i++) data[i] = hash(i, 15);
        double ms = MEDIAN_MS(histogram256(n, data, bins));
        snprintf(size, sizeof size, "n=%zu", n);
        report("histogram256", size, ms, fnv1a64(FNV_OFFSET, bins, sizeof bins));
        free(data);
    }
    {
        int n = PICK(1024, 4096);
        size_t len = (size_t)n * n;
        float *in = malloc(len * 4), *out = malloc(len * 4);
        for (uint32_t i = 0; i < len; i++) in[i] = input_f32(i, 16);
        double ms = MEDIAN_MS(jacobi5(n, in, out));
        snprintf(size, sizeof size, "%dx%d", n, n);
        report("jacobi5", size, ms, fnv1a64(FNV_OFFSET, out, len * 4));
        free(in), free(out);
    }
    {
        int n = PICK(512, 1024);
        size_t len = (size_t)n * n;
        float *temp = malloc(len * 4), *power = malloc(len * 4), *mid = malloc(len * 4), *out = malloc(len * 4);
        for (uint32_t i = 0; i < len; i++) {
            temp[i] = 323.0f + input_f32(i, 17) * 8.0f;
            power[i] = (input_f32(i, 18) + 0.5f) * 0.5f;
        }
        float c[5];
        hotspot_constants(n, n, c);
        float k[4] = {c[4] / c[0], 1.0f / c[1], 1.0f / c[2], 1.0f / c[3]};
        double ms = MEDIAN_MS((hotspot_step(n, k, power, temp, mid), hotspot_step(n, k, power, mid, out)));
        snprintf(size, sizeof size, "%dx%d", n, n);
        report("hotspot", size, ms, fnv1a64(FNV_OFFSET, out, len * 4));
        free(temp), free(power), free(mid), free(out);
    }
    {
        int height = PICK(1024, 4096), width = PICK(2048, 4096);
        size_t len = (size_t)height * width;
        float *in = malloc(len * 4), *out = malloc(len * 4);
        for (uint32_t i = 0; i < len; i++) in[i] = input_f32(i, 19);
        double ms = MEDIAN_MS(transpose(height, width, in, out));
        snprintf(size, sizeof size, "%dx%d", height, width);
        report("transpose", size, ms, fnv1a64(FNV_OFFSET, out, len * 4));
        free(in), free(out);
    }
    {
        int n = PICK(256, 512);
        size_t len = (size_t)n * n;
        float *a = malloc(len * 4), *b = malloc(len * 4), *c = malloc(len * 4);
        for (uint32_t i = 0; i < len; i++) a[i] = input_f32(i, 20), b[i] = input_f32(i, 21);
        double ms = MEDIAN_MS(matrix_mul(n, a, b, c));
        snprintf(size, sizeof size, "%dx%d", n, n);
        report("matrix_mul", size, ms, fnv1a64(FNV_OFFSET, c, len * 4));
        free(a), free(b), free(c);
    }
    {
        int n = PICK(1024, 2048);
        float *pos = malloc(16 * (size_t)n), *accel = malloc(16 * (size_t)n);
        for (uint32_t i = 0; i < 4u * n; i++) pos[i] = i % 4 == 3 ? input_f32(i, 22) + 0.75f : input_f32(i, 22) * 4.0f;
        double ms = MEDIAN_MS(nbody(n, pos, accel));
        snprintf(size, sizeof size, "n=%d", n);
        report("nbody", size, ms, fnv1a64(FNV_OFFSET, accel, 16 * (size_t)n));
        free(pos), free(accel);
    }
    {
        size_t n = PICK(1u << 18, 1u << 22), blocks = (n + 255) / 256;
        int32_t *points = malloc(16 * n), centroids[64], *sums = malloc(blocks * 64 * 4);
        uint32_t *membership = malloc(4 * n), *counts = malloc(blocks * 16 * 4);
        for (uint32_t i = 0; i < 4 * n; i++) points[i] = (int32_t)(hash(i, 23) % 1024);
        for (uint32_t i = 0; i < 64; i++) centroids[i] = (int32_t)(hash(i, 24) % 1024);
        double ms = MEDIAN_MS(kmeans(n, points, centroids, membership, sums, counts));
        snprintf(size, sizeof size, "n=%zu", n);
        uint64_t h = fnv1a64(FNV_OFFSET, membership, 4 * n);
        h = fnv1a64(fnv1a64(h, sums, blocks * 64 * 4), counts, blocks * 16 * 4);
        report("kmeans", size, ms, h);
        free(points), free(sums), free(membership), free(counts);
    }
    {
        size_t n = PICK(1u << 17, 1u << 20);
        uint32_t *keys = malloc(4 * n), *vals = malloc(4 * n), *ok = malloc(4 * n), *ov = malloc(4 * n);
        for (uint32_t i = 0; i < n; i++) keys[i] = (hash(i, 25) & ~0x3ffu) | (i & 0x3ffu), vals[i] = i;
        double ms = MEDIAN_MS(bitonic(n, keys, vals, ok, ov));
        snprintf(size, sizeof size, "n=%zu", n);
        report("bitonic_sort", size, ms, fnv1a64(fnv1a64(FNV_OFFSET, ok, 4 * n), ov, 4 * n));
        free(keys), free(vals), free(ok), free(ov);
    }
    free(times);
    return 0;
}
