#include "device.h"

#include "config.h"
#include "cuda_plugin.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Tries to load the plugin and find a device; on failure why says what happened. */
static int try_cuda(struct gw_device *d, char *why, size_t whylen)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) {
        snprintf(why, whylen, "cannot locate the executable");
        return -1;
    }
    exe[n] = 0;
    snprintf(path, sizeof path, "%s/libcachegate_cuda.so", dirname(exe));
    if (access(path, F_OK) != 0) {
        snprintf(why, whylen, "CUDA plugin %s not built", path);
        return -1;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, whylen, "cannot load CUDA plugin: %s", dlerror());
        return -1;
    }
    gw_cuda_plugin_fn fn = (gw_cuda_plugin_fn)dlsym(h, GW_CUDA_PLUGIN_SYMBOL);
    const struct gw_cuda_plugin *p = fn ? fn() : NULL;
    if (!p || p->abi != GW_CUDA_PLUGIN_ABI) {
        snprintf(why, whylen, "CUDA plugin %s has a different interface version", path);
        dlclose(h);
        return -1;
    }
    struct gw_cuda_device_info info;
    int count = p->probe(&info);
    if (count <= 0) {
        snprintf(why, whylen, "no usable GPU: %s", info.error);
        dlclose(h);
        return -1;
    }
    if (!p->emb_create || !p->eng_create) {
        snprintf(why, whylen, "CUDA plugin %s lacks the %s backend", path,
                 !p->eng_create ? "engine's" : "embedder's");
        dlclose(h);
        return -1;
    }
    d->use_cuda = 1;
    d->plugin = h;
    d->cuda = p;
    snprintf(d->description, sizeof d->description, "cuda:0 %s (sm_%d%d, %.0f GiB)", info.name,
             info.major, info.minor, (double)info.total_mem / (1024.0 * 1024 * 1024));
    return 0;
}

int gw_device_select(int want, struct gw_device *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    snprintf(out->description, sizeof out->description, "cpu");
    if (want == GW_DEVICE_CPU)
        return 0;
    char why[512];
    if (try_cuda(out, why, sizeof why) == 0)
        return 0;
    if (want == GW_DEVICE_CUDA) {
        snprintf(err, errlen, "device = cuda, but %s", why);
        return -1;
    }
    snprintf(out->why_cpu, sizeof out->why_cpu, "%s", why);
    return 0;
}

int gw_device_kv_dtype(int want, int on_device, const char *device, enum kvc_dtype *out,
                       char *err, size_t errlen)
{
    if (on_device && want != GW_KV_AUTO && want != GW_KV_F16) {
        snprintf(err, errlen, "engine.kv_cache_dtype = %s: %s stores keys and values in f16 "
                 "only (use auto or f16, or device = cpu)", gw_kv_dtype_name(want), device);
        return -1;
    }
    *out = want == GW_KV_F32    ? KVC_F32
           : want == GW_KV_BF16 ? KVC_BF16
           : want == GW_KV_Q8_0 ? KVC_Q8_0
                                : KVC_F16;
    return 0;
}
