/*
 * engine — the in-process LLM engine (Llama family, GGUF models). This header holds
 * what every engine module shares with its callers: the status codes and the log
 * callback. The library never prints and never exits.
 */
#ifndef ENG_ENGINE_H
#define ENG_ENGINE_H

#include <stddef.h>

enum {
    ENG_OK = 0,
    ENG_EINVAL = -1,  /* a bad argument */
    ENG_ENOMEM = -2,  /* out of memory */
    ENG_EIO = -3,     /* a file could not be read */
    ENG_EFORMAT = -4, /* a model file is malformed */
    ENG_ENOTSUP = -5, /* valid, but not supported (a tensor type, an architecture) */
    ENG_EFULL = -6,   /* no room (KV blocks, queue) */
    ENG_EDEVICE = -7, /* the device (GPU) failed; the backend's last_error() says how */
};

const char *eng_strerror(int rc);

/* An array *p of *cap elements of elem bytes grown (doubling) to hold need: 0, or
 * ENG_ENOMEM with *p unchanged. */
int eng_grow(void **p, int *cap, int need, size_t elem);

enum eng_log_level { ENG_LOG_DEBUG = 0, ENG_LOG_INFO, ENG_LOG_WARN, ENG_LOG_ERROR };
typedef void (*eng_log_fn)(void *ud, int level, const char *msg);
/* Process-wide; NULL silences. */
void eng_set_log(eng_log_fn fn, void *ud);

#endif
