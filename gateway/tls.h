/*
 * tls — the server's OpenSSL context: TLS 1.2 and 1.3 only, certificate and key from
 * the configuration, or a self-signed certificate for localhost/127.0.0.1/::1
 * generated on first start into DATA_DIR/tls/ and reused afterwards.
 *
 * Main thread, at start-up, and the event loop on SIGHUP (a new context for new
 * connections; those open keep the one they started with).
 */
#ifndef GW_TLS_H
#define GW_TLS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ssl_ctx_st SSL_CTX;

/*
 * cert_file/key_file: both empty to use DATA_DIR/tls/{cert,key}.pem, created when missing
 * unless generated_path is NULL (a reload: a file missing then is an error, not a reason to
 * serve a new self-signed certificate). generated_path (out) receives the certificate path
 * when it was generated now, else "". Returns NULL with a message in err on failure (a
 * missing or unreadable file, a key that does not match the certificate, an OpenSSL
 * error).
 */
SSL_CTX *tls_server_ctx_create(const char *cert_file, const char *key_file,
                               const char *data_dir, char *generated_path, size_t genlen,
                               char *err, size_t errlen);

/* The certificate's notAfter, in seconds since the epoch, and its subject (one line, may be
 * cut); -1 when the context has none. */
int64_t tls_ctx_certificate(SSL_CTX *ctx, char *subject, size_t sublen);

#endif
