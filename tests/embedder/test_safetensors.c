/* tests embedder/safetensors.c: a valid image parses; truncated, corrupt and hostile
 * images are refused with a message naming the problem, never read out of bounds (the
 * sanitizer run checks that). */
#include "embedder.h"
#include "safetensors.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* header JSON + data bytes -> a safetensors image in buf; returns its length */
static size_t image(uint8_t *buf, const char *header, const void *data, size_t dlen)
{
    uint64_t n = strlen(header);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(n >> (8 * i));
    memcpy(buf + 8, header, n);
    memcpy(buf + 8 + n, data, dlen);
    return 8 + n + dlen;
}

Test(safetensors, valid)
{
    uint8_t buf[512];
    float data[6] = {1, 2, 3, 4, 5, 6};
    uint16_t half[2] = {0x3c00, 0xc000}; /* 1.0, -2.0 */
    uint8_t all[32];
    memcpy(all, data, 24);
    memcpy(all + 24, half, 4);
    size_t len = image(buf,
                       "{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[24,28]}}",
                       all, 28);
    emb_st_file *f;
    char err[256];
    cr_assert_eq(emb_st_parse(buf, len, &f, err, sizeof err), 0, "%s", err);
    cr_assert_eq(emb_st_count(f), 2);
    const struct emb_st_tensor *w = emb_st_find(f, "w");
    cr_assert_not_null(w);
    cr_assert_eq(w->dtype, EMB_ST_F32);
    cr_assert_eq(w->ndim, 2);
    cr_assert_eq(w->shape[0], 2);
    cr_assert_eq(w->shape[1], 3);
    cr_assert_eq(w->numel, 6);
    cr_assert_eq(memcmp(w->data, data, 24), 0);
    cr_assert_eq(emb_st_find(f, "h")->dtype, EMB_ST_F16);
    cr_assert_null(emb_st_find(f, "missing"));
    emb_st_close(f);
}

static void refused(const char *header, size_t dlen, size_t cut, const char *msg)
{
    uint8_t buf[1024], data[256] = {0};
    size_t len = image(buf, header, data, dlen);
    if (cut)
        len -= cut;
    emb_st_file *f = NULL;
    char err[256] = "";
    int rc = emb_st_parse(buf, len, &f, err, sizeof err);
    cr_assert_eq(rc, EMB_EFORMAT, "header %s: rc %d", header, rc);
    cr_assert_null(f);
    cr_assert(strstr(err, msg), "header %s: got '%s', want '%s'", header, err, msg);
}

Test(safetensors, hostile)
{
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 1,
            "data_offsets lie outside the data");
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, 0,
            "data_offsets disagree with dtype and shape");
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, 0,
            "data_offsets lie outside the data");
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
            "\"data_offsets\":[0,8]}}",
            8, 0, "overflows");
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,8]}}", 8, 0,
            "negative or non-integer dimension");
    refused("{\"w\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0,
            "unknown dtype");
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, 0, "data_offsets is not a pair");
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
            8, 0, "at most 8 dimensions");
    refused("{\"w\":[1,2]}", 0, 0, "entry is not an object");
    refused("[1,2,3]", 0, 0, "header is not a JSON object");
    refused("{\"w\":", 0, 0, "header is not valid JSON");
    refused("{\"a\":1,\"a\":2}", 0, 0, "header is not valid JSON");
    refused("{\"__metadata__\":3}", 0, 0, "__metadata__ is not an object");
}

Test(safetensors, header_length_beyond_file)
{
    uint8_t buf[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    emb_st_file *f;
    char err[256];
    cr_assert_eq(emb_st_parse(buf, 10, &f, err, sizeof err), EMB_EFORMAT);
    cr_assert(strstr(err, "header length exceeds the file size"), "%s", err);
    cr_assert_eq(emb_st_parse(buf, 5, &f, err, sizeof err), EMB_EFORMAT);
    cr_assert(strstr(err, "shorter than the 8-byte header length"), "%s", err);
}

Test(safetensors, missing_file)
{
    emb_st_file *f;
    char err[256];
    cr_assert_eq(emb_st_open("/nonexistent/model.safetensors", &f, err, sizeof err), EMB_EIO);
    cr_assert(strstr(err, "/nonexistent/model.safetensors: No such file"), "%s", err);
}

Test(safetensors, model_dir_errors_are_clear)
{
    emb_model *m;
    char err[512];
    cr_assert_eq(emb_model_load("/nonexistent", NULL, &m, err, sizeof err), EMB_EIO);
    cr_assert(strstr(err, "/nonexistent/config.json"), "%s", err);
}
