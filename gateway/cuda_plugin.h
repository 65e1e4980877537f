/*
 * cuda_plugin — the interface between build/cachegate and build/libcachegate_cuda.so.
 *
 * The main binary has no link-time dependency on CUDA: it dlopen()s the plugin only
 * when the configured device is "cuda" or "auto", then asks the plugin's one exported
 * symbol, gw_cuda_plugin(), for this table. The plugin links the CUDA runtime
 * statically, so it loads on machines without a driver and its probe says so.
 * abi changes whenever the table (or a struct it passes) does; a mismatched plugin is
 * refused.
 *
 * The backends' creators are handed to the libraries through their options
 * (emb_options.gpu, eng_options.backend), so neither library knows about the plugin.
 */
#ifndef GW_CUDA_PLUGIN_H
#define GW_CUDA_PLUGIN_H

#include "../embedder/emb_impl.h"
#include "../engine/backend.h"

#include <stddef.h>

#define GW_CUDA_PLUGIN_ABI 4
#define GW_CUDA_PLUGIN_SYMBOL "gw_cuda_plugin"

struct gw_cuda_device_info {
    char name[256];
    int major, minor;      /* compute capability */
    size_t total_mem;      /* bytes */
    char error[256];       /* why no device, when probe returns <= 0 */
};

struct eng_cuda_test_ops; /* engine/ops_cuda.h: single ops, for make test-gpu */

struct gw_cuda_plugin {
    int abi;
    /* Number of devices (> 0, info describes device 0), 0 with info->error when none is
     * usable. Never aborts. */
    int (*probe)(struct gw_cuda_device_info *info /* out */);
    emb_backend_create_fn emb_create; /* the embedder's CUDA backend */
    eng_backend_create_fn eng_create; /* the engine's CUDA backend */
    const struct eng_cuda_test_ops *eng_test_ops;
};

typedef const struct gw_cuda_plugin *(*gw_cuda_plugin_fn)(void);

#endif
