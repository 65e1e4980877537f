#include "openai_tok.h"

#include "oai.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gw_otok {
    int n;
    uint32_t *off; /* [n + 1]: token i is bytes[off[i] .. off[i + 1]) */
    unsigned char *bytes;
};

static int b64_value(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes base64 s[0..n) (padded) into out; the byte count, or -1 when it is not base64. */
static long b64_decode(const char *s, size_t n, unsigned char *out)
{
    if (n == 0 || n % 4)
        return -1;
    long w = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
            } else if ((v[k] = b64_value((unsigned char)s[i + k])) < 0 || pad) {
                return -1;
            }
        }
        uint32_t q = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        out[w++] = (unsigned char)(q >> 16);
        if (pad < 2)
            out[w++] = (unsigned char)(q >> 8);
        if (pad < 1)
            out[w++] = (unsigned char)q;
    }
    return w;
}

int gw_otok_load(const char *path, gw_otok **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    gw_otok *t = calloc(1, sizeof *t);
    size_t cap = 1 << 17, bcap = 1 << 20, used = 0;
    char line[512];
    long lineno = 0;
    int rc = -1;
    if (!t || !(t->off = malloc(sizeof *t->off * (cap + 1))) || !(t->bytes = malloc(bcap))) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    t->off[0] = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *sp = strchr(line, ' '), *end;
        long rank = sp ? strtol(sp + 1, &end, 10) : -1;
        if (!sp || rank != t->n || (*end && *end != '\n' && *end != '\r')) {
            snprintf(err, errlen, "%s:%ld: not a \"BASE64 RANK\" line for rank %d", path,
                     lineno, t->n);
            goto out;
        }
        if ((size_t)t->n + 1 >= cap) {
            uint32_t *o = realloc(t->off, sizeof *o * (cap * 2 + 1));
            if (!o) {
                snprintf(err, errlen, "out of memory");
                goto out;
            }
            t->off = o;
            cap *= 2;
        }
        size_t n64 = (size_t)(sp - line);
        if (used + n64 > bcap) {
            unsigned char *b = realloc(t->bytes, bcap * 2);
            if (!b) {
                snprintf(err, errlen, "out of memory");
                goto out;
            }
            t->bytes = b;
            bcap *= 2;
        }
        long k = b64_decode(line, n64, t->bytes + used);
        if (k <= 0) {
            snprintf(err, errlen, "%s:%ld: the token is not base64", path, lineno);
            goto out;
        }
        used += (size_t)k;
        t->off[++t->n] = (uint32_t)used;
    }
    if (ferror(f) || t->n == 0) {
        snprintf(err, errlen, "%s: %s", path, ferror(f) ? strerror(errno) : "no tokens");
        goto out;
    }
    *out = t;
    t = NULL;
    rc = 0;
out:
    fclose(f);
    gw_otok_destroy(t);
    return rc;
}

void gw_otok_destroy(gw_otok *t)
{
    if (!t)
        return;
    free(t->off);
    free(t->bytes);
    free(t);
}

int gw_otok_size(const gw_otok *t)
{
    return t->n;
}

int gw_otok_decode(const gw_otok *t, json_t *ids, char **text, size_t *len, size_t *bad)
{
    size_t n = json_array_size(ids), total = 0;
    *text = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(ids, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= t->n) {
            *bad = i;
            return -1;
        }
        json_int_t id = json_integer_value(v);
        total += t->off[id + 1] - t->off[id];
    }
    unsigned char *raw = malloc(total + 1);
    if (!raw)
        return -2;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        json_int_t id = json_integer_value(json_array_get(ids, i));
        memcpy(raw + w, t->bytes + t->off[id], t->off[id + 1] - t->off[id]);
        w += t->off[id + 1] - t->off[id];
    }
    /* keep the bytes that form UTF-8, in place */
    size_t r = 0, k = 0;
    while (r < w) {
        unsigned cp;
        size_t step = oai_utf8_next(raw + r, w - r, &cp);
        if (step) {
            memmove(raw + k, raw + r, step);
            k += step;
            r += step;
        } else {
            r++;
        }
    }
    raw[k] = 0;
    *text = (char *)raw;
    *len = k;
    return 0;
}
