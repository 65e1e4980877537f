/*
 * device — chooses where the models run: "cpu", "cuda" (the GPU plugin must load and
 * find a device, or the start fails), or "auto" (the GPU when possible, else the CPU
 * with the reason logged once). The plugin is looked up next to the executable.
 *
 * Main thread, at start-up. The plugin handle stays open for the process's life.
 */
#ifndef GW_DEVICE_H
#define GW_DEVICE_H

#include "kvcache.h"

#include <stddef.h>

struct gw_device {
    int use_cuda;           /* 1: the CUDA plugin is loaded and a device exists */
    char description[320];  /* "cpu" or "cuda:0 NAME (sm_90, 80 GiB)" */
    char why_cpu[512];      /* set when auto fell back to the CPU */
    void *plugin;           /* dlopen handle, or NULL */
    const struct gw_cuda_plugin *cuda; /* its table (cuda_plugin.h), or NULL */
};

/* want is enum gw_device_want. Returns 0, or -1 with a message in err (only for "cuda"). */
int gw_device_select(int want, struct gw_device *out, char *err, size_t errlen);

/* The KV pool's storage for engine.kv_cache_dtype (want: enum gw_kv_dtype_want) and a
 * model whose KV lives on device (on_device, named device; NULL or 0 for the CPU), which
 * stores f16 only. Returns 0, or -1 with a message in err when f32 or bf16 is asked of a
 * device. */
int gw_device_kv_dtype(int want, int on_device, const char *device, enum kvc_dtype *out,
                       char *err, size_t errlen);

#endif
