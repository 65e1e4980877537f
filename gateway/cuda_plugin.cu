// The CUDA plugin's entry point and device probe; the engine and embedder backends
// join this library as they are written (see cuda_plugin.h).
#include "cuda_plugin.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

static int probe(struct gw_cuda_device_info *info)
{
    memset(info, 0, sizeof *info);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(info->error, sizeof info->error, "%s", cudaGetErrorString(e));
        return 0;
    }
    if (n == 0) {
        snprintf(info->error, sizeof info->error, "no CUDA device present");
        return 0;
    }
    cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, 0);
    if (e != cudaSuccess) {
        snprintf(info->error, sizeof info->error, "%s", cudaGetErrorString(e));
        return 0;
    }
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->major = p.major;
    info->minor = p.minor;
    info->total_mem = p.totalGlobalMem;
    return n;
}

static const struct gw_cuda_plugin plugin = {GW_CUDA_PLUGIN_ABI, probe};

extern "C" __attribute__((visibility("default"))) const struct gw_cuda_plugin *gw_cuda_plugin(void)
{
    return &plugin;
}
