/*
 * cuda_plugin — the interface between build/cachegate and build/libcachegate_cuda.so.
 *
 * The main binary has no link-time dependency on CUDA: it dlopen()s the plugin only
 * when the configured device is "cuda" or "auto", then asks the plugin's one exported
 * symbol, gw_cuda_plugin(), for this table. The plugin links the CUDA runtime
 * statically, so it loads on machines without a driver and its probe says so.
 * abi changes whenever the table does; a mismatched plugin is refused.
 */
#ifndef GW_CUDA_PLUGIN_H
#define GW_CUDA_PLUGIN_H

#include <stddef.h>

#define GW_CUDA_PLUGIN_ABI 1
#define GW_CUDA_PLUGIN_SYMBOL "gw_cuda_plugin"

struct gw_cuda_device_info {
    char name[256];
    int major, minor;      /* compute capability */
    size_t total_mem;      /* bytes */
    char error[256];       /* why no device, when probe returns <= 0 */
};

struct gw_cuda_plugin {
    int abi;
    /* Number of devices (> 0, info describes device 0), 0 with info->error when none is
     * usable. Never aborts. */
    int (*probe)(struct gw_cuda_device_info *info /* out */);
};

typedef const struct gw_cuda_plugin *(*gw_cuda_plugin_fn)(void);

#endif
