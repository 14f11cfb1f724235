/* SAXPY over N floats offloaded with OpenMP to the x86_64 host device (libomptarget's host
 * plugin): the peer of `examples/saxpy` on the CPU device. Checks its result like the example. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : (1L << 20);
    float a = 2.5f;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    for (long i = 0; i < n; i++) { x[i] = (float)(i % 1024) * 0.25f; y[i] = (float)(i % 7) - 3.0f; }
#pragma omp target teams distribute parallel for map(to: x[0:n]) map(tofrom: y[0:n])
    for (long i = 0; i < n; i++) y[i] = a * x[i] + y[i];
    long bad = 0;
    for (long i = 0; i < n; i++) {
        float want = a * ((float)(i % 1024) * 0.25f) + ((float)(i % 7) - 3.0f);
        if (fabsf(y[i] - want) > fabsf(want) * 1e-6f + 1e-6f) bad++;
    }
    printf("saxpy (OpenMP offload): %ld elements, %ld wrong\n", n, bad);
    free(x); free(y);
    return bad != 0;
}
