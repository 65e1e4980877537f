// The CUDA plugin's entry point and device probe. The backends live in
// embedder/backend_cuda.cu and engine/backend_cuda.cu; their creators are referenced weakly, so a
// plugin built without one of them says so (a NULL field) instead of failing to load.
#include "cuda_plugin.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" {
int emb_cuda_create(const struct emb_config *cfg, const struct emb_weights *w,
                    const struct emb_backend_i **vt, void **ctx, char *err, size_t errlen)
    __attribute__((weak));
int eng_cuda_create(const struct eng_weights *w, void (*progress)(void *, double), void *ud,
                    const struct eng_backend_i **vt, void **ctx, char *err, size_t errlen)
    __attribute__((weak));
extern const struct eng_cuda_test_ops eng_cuda_test_ops_table __attribute__((weak));
}

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

extern "C" __attribute__((visibility("default"))) const struct gw_cuda_plugin *gw_cuda_plugin(void)
{
    static struct gw_cuda_plugin plugin;
    plugin.abi = GW_CUDA_PLUGIN_ABI;
    plugin.probe = probe;
    plugin.emb_create = emb_cuda_create;
    plugin.eng_create = eng_cuda_create;
    plugin.eng_test_ops = &eng_cuda_test_ops_table ? &eng_cuda_test_ops_table : NULL;
    return &plugin;
}
