// <cuda_fp16.h> for the CPU emulator of the GPU (tests/cudaemu, a test double): all of it is in
// fakecuda.h, which says what the emulator checks and what it cannot.
#include "fakecuda.h"
