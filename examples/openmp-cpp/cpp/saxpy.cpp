// SAXPY in an OpenMP target region, called from Rust.
#include <cstddef>
#include <omp.h>

// y[i] = a * x[i] + y[i] for every i < n, in a target region. Returns 1 when the region ran on
// an offload device, 0 when it ran on the host as the initial device (OpenMP's fallback).
extern "C" int openmp_saxpy(float a, const float *x, float *y, std::size_t n) {
  int on_device = 0;
#pragma omp target teams distribute parallel for map(to : x[0 : n]) map(tofrom : y[0 : n]) \
    map(tofrom : on_device)
  for (std::size_t i = 0; i < n; i++) {
    y[i] = a * x[i] + y[i];
    if (i == 0)
      on_device = !omp_is_initial_device();
  }
  return on_device;
}
