#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The newest error on OpenSSL's queue as text; the queue is cleared. */
static void ssl_error(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_peek_last_error();
    char buf[256] = "unknown error";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    snprintf(err, errlen, "%s: %s", what, buf);
}

static int add_ext(X509 *crt, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, crt, crt, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return -1;
    int ok = X509_add_ext(crt, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

static int write_pem(const char *path, int mode, int is_key, EVP_PKEY *key, X509 *crt)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = NULL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0 || !(f = fdopen(fd, "w"))) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int ok = is_key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)
                    : PEM_write_X509(f, crt);
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* OpenSSL's passphrase callback: none is given; *asked (the userdata) notes the ask. */
static int no_passphrase(char *buf, int size, int rwflag, void *asked)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    *(int *)asked = 1;
    return -1;
}

/* A P-256 key and a certificate valid for ten years for the loopback names. */
static int generate(const char *cert_path, const char *key_path, char *err, size_t errlen)
{
    int rc = -1;
    X509 *crt = NULL;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (!key) {
        ssl_error(err, errlen, "generating a key");
        goto fail;
    }
    crt = X509_new();
    if (!crt)
        goto ssl_fail;
    unsigned char serial[16];
    FILE *ur = fopen("/dev/urandom", "rb");
    if (!ur || fread(serial, 1, sizeof serial, ur) != sizeof serial) {
        if (ur)
            fclose(ur);
        snprintf(err, errlen, "reading /dev/urandom failed");
        goto fail;
    }
    fclose(ur);
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(crt))) {
        BN_free(bn);
        goto ssl_fail;
    }
    BN_free(bn);
    X509_set_version(crt, 2);
    X509_gmtime_adj(X509_getm_notBefore(crt), -3600);
    X509_gmtime_adj(X509_getm_notAfter(crt), 10L * 365 * 24 * 3600);
    X509_NAME *name = X509_get_subject_name(crt);
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"cachegate", -1,
                               -1, 0);
    /* a subject of its own: a client that trusts two servers' generated certificates (one
     * bundle) finds each by its issuer's name, which would otherwise be the same */
    char unit[32];
    snprintf(unit, sizeof unit, "generated %02x%02x%02x%02x%02x%02x%02x%02x", serial[0],
             serial[1], serial[2], serial[3], serial[4], serial[5], serial[6], serial[7]);
    X509_NAME_add_entry_by_txt(name, "OU", MBSTRING_ASC, (const unsigned char *)unit, -1, -1,
                               0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
                               -1, 0);
    X509_set_issuer_name(crt, name);
    X509_set_pubkey(crt, key);
    if (add_ext(crt, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") ||
        add_ext(crt, NID_basic_constraints, "critical,CA:TRUE") ||
        add_ext(crt, NID_key_usage, "critical,digitalSignature,keyCertSign") ||
        add_ext(crt, NID_ext_key_usage, "serverAuth") ||
        add_ext(crt, NID_subject_key_identifier, "hash"))
        goto ssl_fail;
    if (!X509_sign(crt, key, EVP_sha256()))
        goto ssl_fail;
    if (write_pem(key_path, 0600, 1, key, NULL) || write_pem(cert_path, 0644, 0, NULL, crt)) {
        snprintf(err, errlen, "writing %s: %s", cert_path, strerror(errno));
        goto fail;
    }
    rc = 0;
    goto done;
ssl_fail:
    ssl_error(err, errlen, "creating the self-signed certificate");
fail:
done:
    X509_free(crt);
    EVP_PKEY_free(key);
    return rc;
}

/* Whether the file's first 64 KB hold marker (a PEM block's label). */
static int pem_holds(const char *path, const char *marker)
{
    FILE *f = fopen(path, "rb");
    char *buf = f ? malloc(65537) : NULL;
    if (!buf) {
        if (f)
            fclose(f);
        return 0;
    }
    size_t n = fread(buf, 1, 65536, f);
    fclose(f);
    buf[n] = 0;
    int found = strstr(buf, marker) != NULL;
    free(buf);
    return found;
}

static int readable(const char *path, const char *what, char *err, size_t errlen)
{
    if (access(path, R_OK) == 0)
        return 0;
    snprintf(err, errlen, "TLS %s '%s' cannot be read: %s", what, path, strerror(errno));
    return -1;
}

SSL_CTX *tls_server_ctx_create(const char *cert_file, const char *key_file,
                               const char *data_dir, char *generated, size_t genlen,
                               char *err, size_t errlen)
{
    char cert_path[4096], key_path[4096];
    if (generated && genlen)
        generated[0] = 0;
    if (!!*cert_file != !!*key_file) {
        snprintf(err, errlen, "tls.cert_file and tls.key_file must be set together");
        return NULL;
    }
    if (*cert_file) {
        snprintf(cert_path, sizeof cert_path, "%s", cert_file);
        snprintf(key_path, sizeof key_path, "%s", key_file);
        if (readable(cert_path, "certificate", err, errlen) ||
            readable(key_path, "key", err, errlen))
            return NULL;
    } else {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/tls", data_dir);
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
            return NULL;
        }
        snprintf(cert_path, sizeof cert_path, "%s/cert.pem", dir);
        snprintf(key_path, sizeof key_path, "%s/key.pem", dir);
        if (access(cert_path, F_OK) != 0 || access(key_path, F_OK) != 0) {
            if (!generated) {
                snprintf(err, errlen, "%s or %s is missing", cert_path, key_path);
                return NULL;
            }
            if (generate(cert_path, key_path, err, errlen))
                return NULL;
            if (generated)
                snprintf(generated, genlen, "%s", cert_path);
        }
    }

    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ssl_error(err, errlen, "SSL_CTX_new");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    /* TLS 1.2 with forward secrecy and AEAD only (Mozilla's "intermediate" list): not the
     * CBC suites OpenSSL would also offer; TLS 1.3's suites are all AEAD already */
    if (SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                     "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                     "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
                                     "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:"
                                     "DHE-RSA-CHACHA20-POLY1305") != 1) {
        ssl_error(err, errlen, "SSL_CTX_set_cipher_list");
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_dh_auto(ctx, 1); /* the DHE suites' groups (ffdhe2048 for an RSA-2048 key) */
    /* an encrypted key is refused, never asked for on the terminal (OpenSSL's default
     * would block the event loop there, at a start or a reload alike) */
    int asked = 0;
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, &asked);
    char what[4200];
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_path) != 1) {
        snprintf(what, sizeof what, "loading certificate %s%s", cert_path,
                 pem_holds(cert_path, "PRIVATE KEY-----") && !pem_holds(cert_path, "CERTIFICATE")
                     ? " (it holds a private key: are tls.cert_file and tls.key_file swapped?)"
                     : "");
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_path, SSL_FILETYPE_PEM) != 1) {
        if (asked) {
            ERR_clear_error();
            snprintf(err, errlen, "the key %s is encrypted: a passphrase is not supported (write "
                     "it unencrypted, readable by this user alone: openssl pkey -in KEY -out "
                     "PLAIN)", key_path);
            SSL_CTX_free(ctx);
            return NULL;
        }
        snprintf(what, sizeof what, "loading key %s%s", key_path,
                 pem_holds(key_path, "CERTIFICATE-----") && !pem_holds(key_path, "PRIVATE KEY")
                     ? " (it holds a certificate: are tls.cert_file and tls.key_file swapped?)"
                     : "");
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(what, sizeof what, "key %s does not match certificate %s", key_path,
                 cert_path);
        goto fail;
    }
    SSL_CTX_set_default_passwd_cb(ctx, NULL);
    return ctx;
fail:
    ssl_error(err, errlen, what);
    if (!*cert_file) { /* the pair this server made: a new one is made once it is gone */
        size_t n = strlen(err);
        snprintf(err + n, errlen > n ? errlen - n : 0,
                 " (the self-signed pair this server made is damaged: delete %s and %s, and "
                 "a new one is made at the next start)", cert_path, key_path);
    }
    SSL_CTX_free(ctx);
    return NULL;
}

int64_t tls_ctx_certificate(SSL_CTX *ctx, char *subject, size_t sublen)
{
    X509 *crt = SSL_CTX_get0_certificate(ctx);
    const ASN1_TIME *t = crt ? X509_get0_notAfter(crt) : NULL;
    struct tm tm;
    if (sublen)
        subject[0] = 0;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return -1;
    if (sublen)
        X509_NAME_oneline(X509_get_subject_name(crt), subject, (int)sublen);
    return (int64_t)timegm(&tm);
}
