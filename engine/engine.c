#include "engine.h"

#include "eng_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static eng_log_fn log_fn;
static void *log_ud;

void eng_set_log(eng_log_fn fn, void *ud)
{
    log_fn = fn;
    log_ud = ud;
}

void eng_log(int level, const char *fmt, ...)
{
    if (!log_fn)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_fn(log_ud, level, buf);
}

const char *eng_strerror(int rc)
{
    switch (rc) {
    case ENG_OK: return "success";
    case ENG_EINVAL: return "invalid argument";
    case ENG_ENOMEM: return "out of memory";
    case ENG_EIO: return "cannot read the model file";
    case ENG_EFORMAT: return "malformed model file";
    case ENG_ENOTSUP: return "not supported";
    case ENG_EFULL: return "no room left";
    case ENG_EDEVICE: return "device error";
    }
    return "unknown error";
}

int eng_grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return ENG_ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}
