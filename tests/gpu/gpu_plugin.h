/*
 * gpu_plugin.h — for the GPU tests (make test-gpu): loads build/libcachegate_cuda.so the
 * way the program does and fails the test, never skips it, when there is no plugin or no
 * device.
 */
#ifndef TESTS_GPU_PLUGIN_H
#define TESTS_GPU_PLUGIN_H

#include "cuda_plugin.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>

#ifndef CUDA_PLUGIN_PATH
#define CUDA_PLUGIN_PATH "build/libcachegate_cuda.so"
#endif

static inline const struct gw_cuda_plugin *gpu_plugin(void)
{
    static const struct gw_cuda_plugin *p;
    if (p)
        return p;
    void *h = dlopen(CUDA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    cr_assert(h, "cannot load the CUDA plugin %s: %s", CUDA_PLUGIN_PATH, dlerror());
    gw_cuda_plugin_fn fn = (gw_cuda_plugin_fn)dlsym(h, GW_CUDA_PLUGIN_SYMBOL);
    cr_assert(fn, "%s has no %s", CUDA_PLUGIN_PATH, GW_CUDA_PLUGIN_SYMBOL);
    const struct gw_cuda_plugin *q = fn();
    cr_assert(q && q->abi == GW_CUDA_PLUGIN_ABI, "plugin interface version differs");
    struct gw_cuda_device_info info;
    cr_assert(q->probe(&info) > 0, "no usable GPU: %s", info.error);
    fprintf(stderr, "GPU: %s (sm_%d%d, %.1f GiB)\n", info.name, info.major, info.minor,
            info.total_mem / 1073741824.0);
    p = q;
    return p;
}

#endif
