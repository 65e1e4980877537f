/* tests gateway/config.c: defaults, a valid file, unknown keys and bad values with
 * FILE:LINE in the message, command-line overrides. */
#include "config.h"
#include "device.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

static char path[64];

static void write_conf(const char *text)
{
    snprintf(path, sizeof path, "/tmp/cg-test-conf-%d.conf", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static void cleanup(void)
{
    unlink(path);
}

TestSuite(config, .fini = cleanup);

Test(config, defaults)
{
    struct gw_config c;
    gw_config_defaults(&c);
    cr_assert_str_eq(c.listen, "127.0.0.1:8443");
    cr_assert_str_eq(c.data_dir, "./var");
    cr_assert_eq(c.device, GW_DEVICE_AUTO);
    cr_assert_eq(c.engine_kv_cache_dtype, GW_KV_AUTO);
    cr_assert_eq(c.engine_cpu_matmul, GW_MATMUL_F32);
    cr_assert_eq(c.max_body_bytes, 4 * 1024 * 1024);
    cr_assert_eq(c.max_header_bytes, 16 * 1024);
    cr_assert_eq(c.shutdown_grace_ms, 10000);
    cr_assert_str_eq(c.cert_file, "");
    gw_config_deinit(&c);
}

Test(config, valid_file)
{
    write_conf("; comment\n"
               "[server]\n"
               "listen = [::1]:9443\n"
               "device = cpu\n"
               "max_body_bytes = 64K\n"
               "shutdown_grace_ms = 0\n"
               "[tls]\n"
               "cert_file = /etc/c.pem\n"
               "key_file = /etc/k.pem\n"
               "[log]\n"
               "level = debug\n"
               "[engine]\n"
               "kv_cache_dtype = f16\n"
               "cpu_matmul = int8\n"
               "[cache]\n"
               "[tenants]\n");
    struct gw_config c;
    char err[256] = "";
    gw_config_defaults(&c);
    cr_assert_eq(gw_config_load(&c, path, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(c.listen, "[::1]:9443");
    cr_assert_eq(c.device, GW_DEVICE_CPU);
    cr_assert_eq(c.max_body_bytes, 64 * 1024);
    cr_assert_eq(c.shutdown_grace_ms, 0);
    cr_assert_str_eq(c.cert_file, "/etc/c.pem");
    cr_assert_eq(c.log_level, 0);
    cr_assert_eq(c.engine_kv_cache_dtype, GW_KV_F16);
    cr_assert_eq(c.engine_cpu_matmul, GW_MATMUL_INT8);
    cr_assert_str_eq(c.data_dir, "./var", "keys not in the file keep their defaults");
    gw_config_deinit(&c);
}

Test(config, shipped_file_is_valid)
{
    struct gw_config c;
    char err[256] = "";
    gw_config_defaults(&c);
    cr_assert_eq(gw_config_load(&c, "conf/cachegate.conf", err, sizeof err), 0, "%s", err);
    gw_config_deinit(&c);
}

static void expect_error(const char *text, const char *line_and_msg)
{
    write_conf(text);
    struct gw_config c;
    char err[512] = "", want[512];
    gw_config_defaults(&c);
    cr_assert_eq(gw_config_load(&c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:%s", path, line_and_msg);
    cr_assert(strstr(err, want) == err, "got '%s', want prefix '%s'", err, want);
    gw_config_deinit(&c);
}

Test(config, unknown_key)
{
    expect_error("[server]\nlisten = 127.0.0.1:1\nlisten_port = 3\n",
                 "3: unknown key 'listen_port' in section [server]");
}

Test(config, unknown_section)
{
    expect_error("[server]\n\n[srever]\nlisten = 127.0.0.1:1\n", "3: unknown section [srever]");
}

Test(config, bad_values)
{
    expect_error("[server]\nmax_body_bytes = lots\n",
                 "2: server.max_body_bytes: 'lots' is not a size");
    expect_error("[server]\nmax_connections = 0\n",
                 "2: server.max_connections: 0 is out of range 1..1000000");
    /* past 64 bits: a number still, out of range (it was "not a size") */
    expect_error("[server]\nmax_body_bytes = 99999999999G\n",
                 "2: server.max_body_bytes: '99999999999G' is out of range 1..1073741824");
    expect_error("[server]\nmax_connections = 99999999999999999999\n",
                 "2: server.max_connections: '99999999999999999999' is out of range "
                 "1..1000000");
    expect_error("[server]\ndevice = gpu\n",
                 "2: server.device: 'gpu' is not one of auto, cpu, cuda");
    expect_error("[server]\nlisten = 127.0.0.1\n", "2: server.listen: must be HOST:PORT");
    expect_error("[engine]\nmodel =\n", "2: engine.model: must not be empty");
    expect_error("[log]\nlevel = loud\n", "2: log.level: 'loud' is not one of");
    expect_error("[engine]\nkv_cache_dtype = fp8\n",
                 "2: engine.kv_cache_dtype: 'fp8' is not one of auto, f32, f16, bf16, q8_0");
    expect_error("[engine]\ncpu_matmul = int4\n",
                 "2: engine.cpu_matmul: 'int4' is not one of f32, int8");
    expect_error("[server]\nthis line has no equals sign\n", "2: syntax error");
    /* a rule across keys, in either order: named when the file is read, not after the
     * models have loaded */
    expect_error("[engine]\nkv_cache_dtype = bf16\nblock_size = 15\n",
                 " engine.kv_cache_dtype = bf16 keeps positions in pairs: engine.block_size "
                 "must be even (it is 15)");
    expect_error("[engine]\nblock_size = 15\nkv_cache_dtype = bf16\n",
                 " engine.kv_cache_dtype = bf16 keeps positions in pairs: engine.block_size "
                 "must be even (it is 15)");
}

/* what the INI reader would read otherwise than the file says is refused, not guessed */
Test(config, lines_read_as_written)
{
    /* an indented line would continue the value before it: the admin key "s3cret auth = on" */
    expect_error("[tenants]\nadmin_key = s3cret\n    auth = on\n", "3: indented line");
    /* a ';' after white space would end the value there, a '#' stay in it */
    expect_error("[tenants]\nadmin_key = abc ;def\n", "2: a ';' or '#' after white space");
    expect_error("[server]\nmax_connections = 5 # five\n", "2: a ';' or '#' after white space");
    /* a line the reader would split in two */
    char text[400];
    snprintf(text, sizeof text, "; %0*d\n[log]\nlevel = warn\n", 200, 0);
    expect_error(text, "1: line longer than 190 characters");
    expect_error("[server]\nmax_connections = 5\nmax_connections = 6\n",
                 "3: server.max_connections is set a second time");
    expect_error("[server\nmax_connections = 5\n", "1: section header without its closing");
    expect_error("[bogus]\n", "1: unknown section [bogus]");
    expect_error("[server] device = bogus\n", "1: text after a section header");
    expect_error("[server]\rdevice = bogus\r", "1: a carriage return inside a line");
    expect_error("max_connections = 5\n", "1: key 'max_connections' before any [section]");
    /* comments and blank lines, indented or not, and a byte order mark are fine */
    write_conf("\xEF\xBB\xBF; top\n  ; indented comment\n\n[server]\n# note\n"
               "max_connections = 7\r\nadmin_path = a;b\n");
    struct gw_config c;
    char err[512] = "";
    gw_config_defaults(&c);
    int rc = gw_config_load(&c, path, err, sizeof err);
    gw_config_deinit(&c);
    cr_assert_eq(rc, -1); /* admin_path is not a key: the ';' without white space stays */
    cr_assert(strstr(err, "unknown key 'admin_path'") != NULL, "%s", err);
    write_conf("\xEF\xBB\xBF; top\n  ; indented comment\n\n[server]\n# note\n"
               "max_connections = 7\r\n");
    gw_config_defaults(&c);
    cr_assert_eq(gw_config_load(&c, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.max_connections, 7);
    gw_config_deinit(&c);
}

Test(config, models_have_names_of_their_own)
{
    expect_error("[embedder]\nmodel_name = smollm2-135m-instruct\n",
                 " engine.model_name and embedder.model_name are both 'smollm2-135m-instruct'");
}

Test(config, empty_and_tiny_files)
{
    static const char *const texts[] = {"", "\n", ";", "[]"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        write_conf(texts[i]);
        struct gw_config c;
        char err[256] = "";
        gw_config_defaults(&c);
        int rc = gw_config_load(&c, path, err, sizeof err);
        gw_config_deinit(&c);
        cr_assert_eq(rc, i == 3 ? -1 : 0, "'%s': %s", texts[i], err); /* "[]": no section */
    }
}

Test(config, a_directory_is_not_a_file)
{
    struct gw_config c;
    char err[256] = "";
    gw_config_defaults(&c);
    cr_assert_eq(gw_config_load(&c, "/tmp", err, sizeof err), -1);
    cr_assert(strstr(err, "/tmp: is a directory") != NULL, "%s", err);
    gw_config_deinit(&c);
}

Test(config, first_error_wins)
{
    expect_error("[log]\nlevel = loud\n[server]\nnope = 1\n", "2: log.level");
}

Test(config, missing_file)
{
    struct gw_config c;
    char err[256] = "";
    gw_config_defaults(&c);
    cr_assert_eq(gw_config_load(&c, "/nonexistent/cachegate.conf", err, sizeof err), -1);
    cr_assert(strstr(err, "/nonexistent/cachegate.conf: cannot open") != NULL, "%s", err);
    gw_config_deinit(&c);
}

Test(config, overrides)
{
    struct gw_config c;
    char err[256] = "";
    gw_config_defaults(&c);
    cr_assert_eq(gw_config_set(&c, "server", "listen", "0.0.0.0:0", "--listen", err, sizeof err),
                 0);
    cr_assert_str_eq(c.listen, "0.0.0.0:0");
    cr_assert_eq(gw_config_set(&c, "server", "device", "tpu", "--device", err, sizeof err), -1);
    cr_assert(strstr(err, "--device: server.device: 'tpu'") == err, "%s", err);
    gw_config_deinit(&c);
}

Test(config, split_listen)
{
    char host[64];
    int port;
    cr_assert_eq(gw_config_split_listen("127.0.0.1:8443", host, sizeof host, &port), 0);
    cr_assert_str_eq(host, "127.0.0.1");
    cr_assert_eq(port, 8443);
    cr_assert_eq(gw_config_split_listen("[::1]:1", host, sizeof host, &port), 0);
    cr_assert_str_eq(host, "::1");
    cr_assert_eq(port, 1);
    cr_assert_eq(gw_config_split_listen("::1:80", host, sizeof host, &port), -1);
    cr_assert_eq(gw_config_split_listen("host:65536", host, sizeof host, &port), -1);
    cr_assert_eq(gw_config_split_listen(":80", host, sizeof host, &port), -1);
    cr_assert_eq(gw_config_split_listen("h:8x", host, sizeof host, &port), -1);
}

/* auth off is for a loopback listener only: each address bound is checked, and a name
 * that cannot be resolved is refused rather than let through to the bind */
Test(config, auth_off_needs_a_loopback_address)
{
    struct gw_config c;
    char err[512] = "";
    gw_config_defaults(&c);
    cr_assert_eq(gw_config_set(&c, "tenants", "auth", "off", "t", err, sizeof err), 0);
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET, "127.0.0.9", &v4.sin_addr);
    cr_assert_eq(gw_config_check_address(&c, (struct sockaddr *)&v4, err, sizeof err), 0);
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &v6.sin6_addr);
    cr_assert_eq(gw_config_check_address(&c, (struct sockaddr *)&v6, err, sizeof err), 0);
    inet_pton(AF_INET, "10.0.0.1", &v4.sin_addr);
    cr_assert_eq(gw_config_check_address(&c, (struct sockaddr *)&v4, err, sizeof err), -1);
    cr_assert(strstr(err, "only on a loopback listener"), "%s", err);
    inet_pton(AF_INET6, "::", &v6.sin6_addr);
    cr_assert_eq(gw_config_check_address(&c, (struct sockaddr *)&v6, err, sizeof err), -1);
    cr_assert_eq(
        gw_config_set(&c, "server", "listen", "no-such-host.invalid:8443", "t", err, sizeof err),
        0);
    cr_assert_eq(gw_config_check_serve(&c, err, sizeof err), -1);
    cr_assert(strstr(err, "cannot be resolved"), "%s", err);
    cr_assert_eq(gw_config_set(&c, "tenants", "auth", "on", "t", err, sizeof err), 0);
    cr_assert_eq(gw_config_check_address(&c, (struct sockaddr *)&v4, err, sizeof err), 0);
    cr_assert_eq(gw_config_check_serve(&c, err, sizeof err), 0, "auth on: binding says why");
    gw_config_deinit(&c);
}

/* engine.kv_cache_dtype as the pool's storage: auto is f16; a device stores f16 only, so
 * f32, bf16 and q8_0 there are a clear error naming the setting */
Test(config, kv_cache_dtype_to_storage)
{
    const int want[] = {GW_KV_AUTO, GW_KV_F32, GW_KV_F16, GW_KV_BF16, GW_KV_Q8_0};
    const enum kvc_dtype cpu[] = {KVC_F16, KVC_F32, KVC_F16, KVC_BF16, KVC_Q8_0};
    const char *on_device[] = {NULL, "engine.kv_cache_dtype = f32", NULL,
                               "engine.kv_cache_dtype = bf16", "engine.kv_cache_dtype = q8_0"};
    for (int i = 0; i < 5; i++) {
        enum kvc_dtype got = (enum kvc_dtype)-1;
        char err[256] = "";
        cr_assert_eq(gw_device_kv_dtype(want[i], 0, NULL, &got, err, sizeof err), 0);
        cr_assert_eq(got, cpu[i], "want %d", want[i]);
        int rc = gw_device_kv_dtype(want[i], 1, "cuda:0", &got, err, sizeof err);
        if (on_device[i]) {
            cr_assert_eq(rc, -1);
            cr_assert(strstr(err, on_device[i]) && strstr(err, "cuda:0"), "%s", err);
        } else {
            cr_assert_eq(rc, 0);
            cr_assert_eq(got, KVC_F16);
        }
    }
}
