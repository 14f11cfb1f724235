// Shared by the CUDA and HIP sources; editing it rebuilds them.
#pragma once
#define POLY_A 0.5f
#define POLY_B 3.0f
