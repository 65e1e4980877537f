#include "server.h"

#include "completion.h"
#include "cuda_plugin.h"
#include "device.h"
#include "embed_worker.h"
#include "http_impl.h"
#include "gguf.h"
#include "guard.h"
#include "log.h"
#include "metrics.h"
#include "oai.h"
#include "stored_chat.h"
#include "tls.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define DRAIN_TICK_MS 50
#define DB_CHECK_S 10 /* how often the database file is looked at (db_lost()) */
/* after the grace period, how long the replies told to end (on_cut) have to go out */
#define CUT_GRACE_MS 2000

/* Framing state of the request currently arriving on a connection. */
enum frame {
    F_HEAD,
    F_BODY,       /* body_left bytes of a Content-Length body */
    F_CHUNK_SIZE, /* a chunked body's next size line */
    F_CHUNK_DATA, /* body_left bytes of a chunk */
    F_CHUNK_END,  /* the line break after a chunk's data */
    F_TRAILER,    /* trailer lines up to the blank line that ends the body */
    F_REJECTED
};

struct gw_req;

struct conn {
    struct conn *prev, *next;
    gw_server *srv;
    struct bufferevent *ssl_bev; /* owned; freed after its output is flushed */
    struct bufferevent *bev;     /* the filter, owned by evhttp */
    struct event *timer;         /* header/body deadline, or a deferred close */
    struct event *kick;          /* moves queued response bytes into the TLS layer */
    enum frame frame;
    char *head; /* [max_header_bytes], the head being received */
    size_t head_len;
    uint64_t body_left;
    uint64_t body_total; /* a chunked body's data so far */
    size_t passed_head_len; /* the head passed on last, still in head[] while its body comes */
    uint64_t started, completed; /* requests whose first byte arrived / that were answered */
    uint64_t passed;             /* requests handed to evhttp */
    struct event *resume;        /* passes a held pipelined request on: see on_complete() */
    struct gw_req *cur;         /* the request being answered, if any */
    struct evbuffer_cb_entry *out_cb;  /* on ssl_bev's output */
    struct evbuffer_cb_entry *kick_cb; /* on bev's output */
    int kicking; /* frame_output may move bytes: see on_kick() */
    int close_when_flushed;
    int closing;
    int handshaking; /* the timer is the TLS handshake's deadline (header_timeout_ms) */
    int reclaimed;   /* closed, idle, to make room at server.max_connections */
    struct timespec idle_since; /* when its last request was answered */
    struct timespec head_t0;    /* when the current request's first byte came */
};

struct gw_req {
    gw_server *srv;
    struct conn *conn;
    struct evhttp_request *req;
    struct timespec t0;
    char id[48];
    const char *route;  /* a route table path or "unmatched": bounded metric labels */
    const char *method;
    int status;
    int deferred; /* the reply comes later, from a completion callback */
    int gone;     /* deferred, and the client went away first */
    int replied;  /* the whole reply was handed to evhttp: nothing is left to cancel */
    void (*on_gone)(void *arg);
    void *gone_arg;
    void (*on_cut)(void *arg); /* the shutdown's grace ran out: end the reply with an error */
    void *cut_arg;
    struct event *hangup; /* while deferred: watches for the client hanging up */
    int own_req; /* evhttp detached req from its connection: we free it */
    int long_timeout; /* the connection's timeout was raised while deferred */
    char tenant[64];  /* who asked, for the access log ("" before or without auth) */
    char key[16];     /* the prefix of the key it came with (never more of it) */
    char peer[48];    /* the client's address, read when the request came */
    char path[96];    /* the target's path (no query: it may hold secrets), logged when no
                       * route matched */
    char cache[12];   /* what the caches did for it (X-Cache, X-Cache-Kind), or "" */
    int failed;       /* the status of an error said after a 200's headers (a stream's), or 0 */
};

struct route {
    const char *path; /* ending in '/': a prefix, followed by a non-empty name */
    unsigned methods; /* EVHTTP_REQ_* mask */
    const char *allow;
    void (*handle)(struct gw_req *rc);
    const char *label; /* a prefix route's name in metrics and logs */
    /* 1: a path under the name (a '/' after it) is no route, whatever its method: the
     * handler answers it 404 rather than the method 405 */
    int leaf;
};

struct gw_server {
    const struct gw_config *cfg;
    const struct gw_device *dev;
    struct event_base *base;
    struct event *log_flush; /* writes the event loop's held log lines (gw_log_hold) */
    struct event *db_check;  /* every DB_CHECK_S: the database file is still the one open */
    int db_lost;             /* it was deleted or replaced (said once in the log) */
    struct evhttp *http;
    struct evconnlistener *listener;   /* owned by bound */
    struct evhttp_bound_socket *bound;
    int accept_paused;
    int fd_paused;              /* accept() found no file descriptor: paused a moment */
    struct event *accept_retry; /* ends the moment */
    struct event *reclaim_check; /* while paused at max_connections: on_reclaim_check() */
    long accept_failures, accept_failures_logged;
    struct timespec t_accept_log;
    SSL_CTX *ssl;
    gw_cq *cq;
    emb_model *emb;
    gw_embedw *embw;
    gw_otok *otok; /* OpenAI's token ids to text, for /v1/embeddings; NULL: none */
    store *st;
    gw_cache *cache;
    gw_tenants *tenants;
    struct gw_llm llm;
    gw_metrics *metrics;
    gw_metric *m_requests, *m_latency, *m_conns, *m_paused, *m_uptime, *m_info, *m_start;
    gw_metric *m_store_failed, *m_accept_failed, *m_db_lost;
    /* the store's last failed write (the writer thread's), for /health */
    atomic_llong store_failed_ms;
    pthread_mutex_t store_failed_mu;
    char store_failed_what[256];
    dev_t db_dev; /* the database file opened, to tell one deleted or replaced under it */
    ino_t db_ino;
    gw_metric *m_cert_expiry, *m_tls_reloads;
    struct conn *conns;
    long nconns;
    struct event *sig_int, *sig_term, *sig_hup, *drain_timer;
    int draining;
    int cut; /* the grace period ran out: deferred replies were told to end (on_cut) */
    long told; /* how many */
    struct timespec t_cut;
    struct timespec t_start, t_drain;
    time_t wall_start;
    int exit_code;
};

static int ssl_conn_index = -1;

static void update_accepting(gw_server *srv);
static void next_request_id(char *buf, size_t len);

static double since_ms(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) * 1e3 + (double)(now.tv_nsec - t0->tv_nsec) / 1e6;
}

static struct timeval ms_tv(int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    return tv;
}

static const char *method_name(enum evhttp_cmd_type t)
{
    switch (t) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    }
    return "OTHER";
}

/* ------------------------------------------------------------------ connections */

/* Whether evhttp still holds the filter. bufferevent_free() clears the callbacks at once
 * but finalizes (and so calls conn_free) later; in between the filter may have no
 * reference left, and touching it through the API (which takes and drops one) would
 * finalize it a second time. */
static int evhttp_holds(struct conn *c)
{
    bufferevent_event_cb eventcb = NULL;
    bufferevent_getcb(c->bev, NULL, NULL, &eventcb, NULL);
    return eventcb != NULL;
}

/* Closes a connection from outside evhttp by handing it an end-of-file: evhttp then
 * frees the connection, which frees the filter, which calls conn_free(). */
static void conn_close(struct conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    if (evhttp_holds(c))
        bufferevent_trigger_event(c->bev, BEV_EVENT_EOF | BEV_EVENT_READING, 0);
}

/* Closes the connection once the TLS layer has handed every response byte to the
 * kernel. evhttp must never free a connection with a response still buffered: it
 * shuts the socket down right after, and the rest of the response would be lost. */
static void close_when_flushed(struct conn *c)
{
    c->close_when_flushed = 1;
    c->frame = F_REJECTED; /* nothing more is read on this connection */
    c->head_len = 0;
    struct timeval now = {0, 0};
    evtimer_add(c->timer, &now); /* checked outside the current callback */
}

static void conn_reject(struct conn *c, int status, const char *reason, const char *message,
                        const char *code);

static void on_conn_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    if (c->close_when_flushed) {
        if (evbuffer_get_length(bufferevent_get_output(c->ssl_bev)) == 0) {
            /* TLS's end of data (close_notify), which RFC 8446 asks of the side that
             * closes: by it a client tells a whole response read to the close (HTTP/1.0)
             * from one cut short */
            SSL *ssl = bufferevent_openssl_get_ssl(c->ssl_bev);
            if (ssl && SSL_is_init_finished(ssl) && !(SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN))
                SSL_shutdown(ssl);
            ERR_clear_error();
            conn_close(c);
        }
        return; /* on_ssl_output re-arms when the output drains */
    }
    gw_log(GW_LOG_DEBUG, "closing connection: %s not received in time",
           c->handshaking ? "TLS handshake" : c->frame == F_HEAD ? "request head"
                                                                 : "request body");
    if (!c->handshaking && c->frame != F_REJECTED && (c->head_len > 0 || c->frame != F_HEAD)) {
        /* a request begun and not finished: told so (RFC 9110 15.5.9), not left to read
         * "server disconnected without a response" */
        int head = c->frame == F_HEAD;
        if (!head)
            c->head_len = c->passed_head_len; /* (its request line, for the access log) */
        conn_reject(c, 408, "Request Timeout",
                    head ? "The request's head did not arrive within server.header_timeout_ms"
                         : "The request's body did not arrive within server.body_timeout_ms",
                    "request_timeout");
        return;
    }
    conn_close(c);
}

static void on_ssl_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct conn *c = arg;
    if (c->close_when_flushed && info->n_deleted && evbuffer_get_length(buf) == 0) {
        struct timeval now = {0, 0};
        evtimer_add(c->timer, &now);
    }
}

static void req_finish(struct gw_req *rc, int client_gone);

/* A client that spoke plain HTTP to the TLS port (OpenSSL refuses its "GET" or "POST" as
 * a handshake) gets a plain 400 saying so, as nginx answers it, instead of a bare close
 * that clients report as an empty reply. OpenSSL's info callback: it runs as the handshake
 * fails, while the socket is still open for writing. */
static void on_ssl_info(const SSL *ssl, int where, int ret)
{
    if (where & SSL_CB_HANDSHAKE_DONE) {
        /* the handshake's deadline passes to the idle timeout until a request starts */
        struct conn *c = SSL_get_ex_data(ssl, ssl_conn_index);
        if (c && c->handshaking) {
            c->handshaking = 0;
            if (!c->close_when_flushed && c->head_len == 0)
                evtimer_del(c->timer);
        }
        return;
    }
    if (!(where & SSL_CB_EXIT) || ret > 0) return;
    unsigned long e = ERR_peek_last_error();
    if (ERR_GET_LIB(e) != ERR_LIB_SSL || ERR_GET_REASON(e) != SSL_R_HTTP_REQUEST) return;
    int fd = SSL_get_fd(ssl);
    if (fd < 0) return;
    static const char reply[] =
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 54\r\n"
        "Server: cachegate/" GW_VERSION "\r\nConnection: close\r\n\r\n"
        "This port speaks HTTPS: use https:// in the address.\r\n";
    ssize_t n = send(fd, reply, sizeof reply - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n; /* best effort: the connection is going anyway */
    gw_log(GW_LOG_DEBUG, "a plain HTTP request on the TLS port: answered 400");
}

/* The filter's free_context: runs when evhttp has freed the connection (the filter
 * frees the TLS bufferevent and closes the socket). */
static void conn_free(void *arg)
{
    struct conn *c = arg;
    gw_server *srv = c->srv;
    if (c->cur)
        req_finish(c->cur, 1);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->nconns--;
    update_accepting(srv);
    event_free(c->timer);
    event_free(c->kick);
    event_free(c->resume);
    free(c->head);
    SSL_set_ex_data(bufferevent_openssl_get_ssl(c->ssl_bev), ssl_conn_index, NULL);
    evbuffer_remove_cb_entry(bufferevent_get_output(c->ssl_bev), c->out_cb);
    if (c->kick_cb)
        evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->kick_cb);
    free(c);
}

/* Case-insensitive "Name:" match at the start of a header line; returns the value. */
static const char *header_value(const char *line, size_t len, const char *name)
{
    size_t n = strlen(name);
    if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
        return NULL;
    const char *v = line + n + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    return v;
}

static int plain_id(const char *s);

/* The X-Request-Id of the head held back, when plain, else a new one. The head may be
 * incomplete (a 431): nothing is read past c->head_len. */
static void head_request_id(struct conn *c, char *id, size_t len)
{
    static const char name[] = "X-Request-Id:";
    const size_t nl = sizeof name - 1;
    const char *p = memchr(c->head, '\n', c->head_len), *end = c->head + c->head_len;
    while (p && p + 1 < end) {
        const char *line = p + 1;
        p = memchr(line, '\n', (size_t)(end - line));
        size_t ll = (size_t)((p ? p : end) - line);
        if (ll <= nl || strncasecmp(line, name, nl) != 0)
            continue;
        size_t a = nl, b;
        while (a < ll && (line[a] == ' ' || line[a] == '\t'))
            a++;
        for (b = a; b < ll && line[b] != ' ' && line[b] != '\t' && line[b] != '\r'; b++)
            ;
        char given[64];
        if (b - a < sizeof given) {
            memcpy(given, line + a, b - a);
            given[b - a] = 0;
            if (plain_id(given)) {
                snprintf(id, len, "%s", given);
                return;
            }
        }
        break;
    }
    next_request_id(id, len);
}

/* Now as a Date header gives it (RFC 9110's IMF-fixdate); 0 if the clock fails. */
static int http_date(char *out, size_t len)
{
    time_t now = time(NULL);
    struct tm tm;
    return gmtime_r(&now, &tm) && strftime(out, len, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* The path of a request target, without its query (which may hold secrets), cut to fit
 * out. */
static void target_path(const char *target, char *out, size_t len)
{
    snprintf(out, len, "%.*s", (int)strcspn(target, "?#"), target);
}

/* Answers a request the filter refused and closes the connection after it. */
static void conn_reject(struct conn *c, int status, const char *reason, const char *message,
                        const char *code)
{
    char *body = oai_error_dumps(status, message, NULL, code);
    char id[48];
    head_request_id(c, id, sizeof id);
    /* a reply to HEAD has the length of the body it would have, and no body */
    int head_method = c->head_len > 5 && memcmp(c->head, "HEAD ", 5) == 0;
    struct evbuffer *out = bufferevent_get_output(c->ssl_bev);
    char date[64];
    if (!http_date(date, sizeof date))
        date[0] = 0;
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                        "Content-Length: %zu\r\nX-Request-Id: %s\r\nServer: cachegate/" GW_VERSION
                        "\r\n%s%s%sConnection: close\r\n\r\n%s",
                        status, reason, body ? strlen(body) : 0, id, date[0] ? "Date: " : "",
                        date, date[0] ? "\r\n" : "", body && !head_method ? body : "");
    free(body);

    /* method and path for the access log, from the request line held back, and the
     * client's address */
    char method[16] = "-", target[256] = "", path[96] = "-", peer[INET6_ADDRSTRLEN] = "";
    char line[300];
    size_t n = c->head_len < sizeof line - 1 ? c->head_len : sizeof line - 1;
    memcpy(line, c->head, n);
    line[n] = 0;
    if (sscanf(line, "%15s %255s", method, target) == 2)
        target_path(target, path, sizeof path);
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    if (getpeername(bufferevent_getfd(c->ssl_bev), (struct sockaddr *)&sa, &sl) == 0)
        evutil_inet_ntop(sa.ss_family,
                         sa.ss_family == AF_INET6
                             ? (void *)&((struct sockaddr_in6 *)&sa)->sin6_addr
                             : (void *)&((struct sockaddr_in *)&sa)->sin_addr,
                         peer, sizeof peer);
    /* (from the request's first byte: a 408's wait for a slow client is its latency) */
    double ms = c->started ? since_ms(&c->head_t0) : 0;
    gw_log_access(id, method, "unmatched", path, status, 0, ms, peer[0] ? peer : NULL, NULL,
                  NULL, NULL);
    char st[8];
    snprintf(st, sizeof st, "%d", status);
    gw_metric_add(c->srv->m_requests, 1, "unmatched", st);
    gw_metric_observe(c->srv->m_latency, ms / 1000.0, "unmatched", st);

    close_when_flushed(c);
}

/* The methods evhttp routes, and whether it reads a body for them: as evhttp frames
 * requests, only POST, PUT and PATCH have one. */
static const struct {
    const char *name;
    int body;
} http_methods[] = {{"GET", 0},    {"HEAD", 0},    {"POST", 1}, {"PUT", 1},
                    {"DELETE", 0}, {"OPTIONS", 0}, {"PATCH", 1}};

/* RFC 9110's token characters: method and header names */
static int tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int bad_request(struct conn *c, const char *message)
{
    conn_reject(c, 400, "Bad Request", message, "invalid_request");
    return -1;
}

/* The request line of a complete head: "METHOD target HTTP/1.x". An absolute-form target
 * ("https://host/path?q") becomes its origin form ("/path?q") in place, which is what
 * evhttp routes. 0, with *method (an index into http_methods) and *http11; or -1 after
 * refusing the request. */
static int check_request_line(struct conn *c, int *method, int *http11)
{
    char *h = c->head, *eol = memchr(h, '\n', c->head_len);
    size_t ll = (size_t)(eol - h);
    if (ll && h[ll - 1] == '\r')
        ll--;
    char *sp1 = memchr(h, ' ', ll);
    char *sp2 = sp1 ? memchr(sp1 + 1, ' ', ll - (size_t)(sp1 + 1 - h)) : NULL;
    if (!sp1 || !sp2 || sp1 == h || sp2 == sp1 + 1 ||
        memchr(sp2 + 1, ' ', ll - (size_t)(sp2 + 1 - h)))
        return bad_request(c, "Malformed request line; expected \"METHOD /path HTTP/1.1\"");
    size_t ml = (size_t)(sp1 - h);
    for (size_t i = 0; i < ml; i++)
        if (!tchar((unsigned char)h[i]))
            return bad_request(c, "Malformed request line: the method is not a token");
    *method = -1;
    for (size_t i = 0; i < sizeof http_methods / sizeof *http_methods; i++)
        if (strlen(http_methods[i].name) == ml && memcmp(http_methods[i].name, h, ml) == 0)
            *method = (int)i;
    const char *ver = sp2 + 1;
    size_t vl = ll - (size_t)(ver - h);
    if (vl != 8 || memcmp(ver, "HTTP/", 5) != 0 || ver[6] != '.' ||
        ver[5] < '0' || ver[5] > '9' || ver[7] < '0' || ver[7] > '9')
        return bad_request(c, "Malformed request line: the version is not HTTP/1.1");
    if (ver[5] != '1' || (ver[7] != '0' && ver[7] != '1')) {
        char msg[96];
        snprintf(msg, sizeof msg, "HTTP version %.8s is not supported; use HTTP/1.1", ver);
        conn_reject(c, 505, "HTTP Version Not Supported", msg, "http_version_not_supported");
        return -1;
    }
    *http11 = ver[7] == '1';
    if (*method < 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "Method %.*s is not implemented", (int)(ml < 32 ? ml : 32), h);
        conn_reject(c, 501, "Not Implemented", msg, "not_implemented");
        return -1;
    }
    char *t = sp1 + 1;
    size_t tl = (size_t)(sp2 - t);
    for (size_t i = 0; i < tl; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] == 0x7f)
            return bad_request(c, "Malformed request target");
    if (t[0] == '/' && tl > 1 && t[1] == '/')
        return bad_request(c, "The request target may not start with \"//\"");
    if (t[0] == '/')
        return 0;
    size_t scheme = tl > 7 && strncasecmp(t, "http://", 7) == 0    ? 7
                    : tl > 8 && strncasecmp(t, "https://", 8) == 0 ? 8
                                                                   : 0;
    if (!scheme)
        return bad_request(c, "The request target must be a path (\"/v1/...\") or an "
                              "absolute URL");
    size_t k = scheme;
    while (k < tl && t[k] != '/' && t[k] != '?')
        k++;
    /* cut "https://host", leaving "/path?q"; "https://host?q" and "https://host" get a "/" */
    size_t cut = k < tl && t[k] == '/' ? k : k - 1;
    if (cut != k)
        t[cut] = '/';
    memmove(t, t + cut, c->head_len - (size_t)(t + cut - h));
    c->head_len -= cut;
    return 0;
}

/* Looks at a complete head: 0 to pass it to evhttp with *body (out) bytes of body. */
static int check_head(struct conn *c, uint64_t *body, int *chunked)
{
    const struct gw_config *cfg = c->srv->cfg;
    int method, http11, have_len = 0, hosts = 0;
    *chunked = 0;
    uint64_t len = 0;
    if (check_request_line(c, &method, &http11) != 0)
        return -1;
    const char *p = memchr(c->head, '\n', c->head_len);
    const char *end = c->head + c->head_len;
    while (p && p + 1 < end) {
        const char *line = p + 1;
        p = memchr(line, '\n', (size_t)(end - line));
        size_t ll = (size_t)((p ? p : end) - line);
        if (ll && line[ll - 1] == '\r')
            ll--;
        if (ll == 0)
            continue; /* the blank line that ends the head */
        if (line[0] == ' ' || line[0] == '\t')
            return bad_request(c, "Header lines may not be folded (a line starts with white "
                                  "space)");
        const char *colon = memchr(line, ':', ll);
        size_t nl = colon ? (size_t)(colon - line) : 0;
        for (size_t i = 0; i < nl && colon; i++)
            if (!tchar((unsigned char)line[i]))
                colon = NULL;
        if (!colon || nl == 0)
            return bad_request(c, "Malformed header line; expected \"Name: value\"");
        for (size_t i = nl + 1; i < ll; i++)
            if (((unsigned char)line[i] < 0x20 && line[i] != '\t') || line[i] == 0x7f) {
                char msg[96];
                snprintf(msg, sizeof msg, "Control character in the value of header %.*s",
                         (int)(nl < 40 ? nl : 40), line);
                return bad_request(c, msg);
            }
        const char *v;
        if ((v = header_value(line, ll, "Host"))) {
            /* uri-host [":" port] (RFC 9112 3.2: anything else is a 400); trailing white
             * space is the field's own (OWS) */
            size_t vl = (size_t)(line + ll - v);
            while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
            for (size_t i = 0; i < vl; i++)
                if (strchr(" \t/?#@\\\"<>{}|^`", v[i]))
                    return bad_request(c, "Invalid Host header");
            hosts++;
        }
        if ((v = header_value(line, ll, "Expect"))) {
            size_t vl = (size_t)(line + ll - v);
            while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
            if (vl != 12 || strncasecmp(v, "100-continue", 12) != 0) {
                conn_reject(c, 417, "Expectation Failed",
                            "Only \"Expect: 100-continue\" is supported", "expectation_failed");
                return -1;
            }
        }
        if ((v = header_value(line, ll, "Transfer-Encoding"))) {
            size_t vl = (size_t)(line + ll - v);
            while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
            if (vl != 7 || strncasecmp(v, "chunked", 7) != 0 || *chunked) {
                conn_reject(c, 501, "Not Implemented",
                            "Only \"Transfer-Encoding: chunked\" is supported for request bodies",
                            "not_implemented");
                return -1;
            }
            *chunked = 1;
        }
        if ((v = header_value(line, ll, "Content-Length"))) {
            char *e;
            errno = 0;
            unsigned long long x = strtoull(v, &e, 10);
            while (*e == ' ' || *e == '\t' || *e == '\r')
                e++;
            if (*v < '0' || *v > '9' || *e != '\n' || errno || (have_len && x != len))
                return bad_request(c, "Invalid Content-Length header");
            have_len = 1;
            len = x;
        }
    }
    if (http11 && hosts != 1)
        return bad_request(c, hosts ? "More than one Host header"
                                    : "An HTTP/1.1 request needs a Host header");
    if (*chunked && (have_len || !http11))
        /* both framings, or chunks HTTP/1.0 does not have: one side would read another
         * request's bytes as this one's body (RFC 9112 6.1) */
        return bad_request(c, have_len ? "Both Content-Length and Transfer-Encoding"
                                       : "Transfer-Encoding in an HTTP/1.0 request");
    if ((len > 0 || *chunked) && !http_methods[method].body) {
        char msg[96];
        snprintf(msg, sizeof msg, "A %s request has no body; send Content-Length: 0 or none",
                 http_methods[method].name);
        return bad_request(c, msg);
    }
    if (len > (uint64_t)cfg->max_body_bytes) {
        char msg[160];
        snprintf(msg, sizeof msg, "Request body of %llu bytes exceeds the limit of %lld bytes",
                 (unsigned long long)len, (long long)cfg->max_body_bytes);
        conn_reject(c, 413, "Payload Too Large", msg, "request_too_large");
        return -1;
    }
    *body = len;
    return 0;
}

static void arm(struct conn *c, int64_t ms)
{
    struct timeval tv = ms_tv(ms);
    evtimer_add(c->timer, &tv);
}

/* The longest line of a chunked body's framing: a chunk's size with its extensions, or a
 * trailer field. */
#define CHUNK_LINE_MAX 1024

/*
 * One line of a chunked body's framing (RFC 9112 7.1), passed on to evhttp, which decodes
 * the body: a chunk's size (in hex, extensions after ';' ignored), the line break after a
 * chunk's data, or a trailer line. The filter only follows it, to know where the body ends
 * and to hold it to server.max_body_bytes. 1 when a line was taken, 0 when its end has not
 * arrived yet, -1 after refusing the request.
 */
static int chunk_line_take(struct conn *c, struct evbuffer *src, struct evbuffer *dst)
{
    size_t eol = 0;
    struct evbuffer_ptr at = evbuffer_search_eol(src, NULL, &eol, EVBUFFER_EOL_LF);
    if (at.pos < 0) {
        if (evbuffer_get_length(src) > CHUNK_LINE_MAX + 1) /* (with its CR) */
            return bad_request(c, "A chunk size or trailer line is too long");
        return 0;
    }
    size_t n = (size_t)at.pos;
    if (n > CHUNK_LINE_MAX + 1)
        return bad_request(c, "A chunk size or trailer line is too long");
    char cr = 0;
    if (n > 0) {
        struct evbuffer_ptr before;
        evbuffer_ptr_set(src, &before, n - 1, EVBUFFER_PTR_SET);
        evbuffer_copyout_from(src, &before, &cr, 1);
    }
    /* CRLF only (RFC 9112 7.1): a proxy in front that ends a line at a bare LF where this
     * would not, or the other way round, is how requests are smuggled */
    if (cr != '\r')
        return bad_request(c, "A chunk size or trailer line ends in a bare LF, not CRLF");
    n--; /* the line without its CRLF */
    eol = 2;
    char line[CHUNK_LINE_MAX + 1];
    evbuffer_copyout(src, line, n);
    line[n] = 0;
    /* nothing refused reaches evhttp: it would answer it itself, and close under our reply */
    if (c->frame == F_CHUNK_END) {
        if (n)
            return bad_request(c, "A chunk's data is longer than its size");
        evbuffer_remove_buffer(src, dst, n + eol);
        c->frame = F_CHUNK_SIZE;
        return 1;
    }
    if (c->frame == F_TRAILER) {
        const char *colon = memchr(line, ':', n);
        for (const char *q = line; colon && q < colon; q++)
            if (!tchar((unsigned char)*q))
                colon = NULL;
        if (n && (!colon || colon == line))
            return bad_request(c, "Malformed trailer line; expected \"Name: value\"");
        c->body_left += n + eol; /* the trailer's bytes so far, held to the head's limit */
        if (c->body_left > (uint64_t)c->srv->cfg->max_header_bytes) {
            conn_reject(c, 431, "Request Header Fields Too Large",
                        "The chunked body's trailer exceeds server.max_header_bytes",
                        "request_header_too_large");
            return -1;
        }
        if (n) { /* trailer fields are not headers (RFC 9110 6.5): dropped, not passed on */
            evbuffer_drain(src, n + eol);
            return 1;
        }
        evbuffer_remove_buffer(src, dst, n + eol); /* the blank line: the body is complete */
        c->frame = F_HEAD;
        evtimer_del(c->timer);
        return 1;
    }
    evbuffer_drain(src, n + eol); /* passed on below, without extensions (evhttp refuses
                                   * them) */
    size_t digits = strspn(line, "0123456789abcdefABCDEF"); /* no sign, no 0x */
    const char *e = line + digits;
    while (*e == ' ' || *e == '\t')
        e++;
    errno = 0;
    unsigned long long size = strtoull(line, NULL, 16);
    if (!digits || errno || (*e && *e != ';'))
        return bad_request(c, "Invalid chunk size");
    const int64_t max = c->srv->cfg->max_body_bytes;
    if (size > (uint64_t)max || c->body_total + size > (uint64_t)max) {
        char msg[160];
        snprintf(msg, sizeof msg, "Request body of more than %lld bytes exceeds the limit of "
                 "%lld bytes", (long long)max, (long long)max);
        conn_reject(c, 413, "Payload Too Large", msg, "request_too_large");
        return -1;
    }
    evbuffer_add_printf(dst, "%llx\r\n", size);
    c->body_total += size;
    c->body_left = size;
    c->frame = size ? F_CHUNK_DATA : F_TRAILER;
    return 1;
}

static int chunk_line(struct conn *c, struct evbuffer *src, struct evbuffer *dst)
{
    c->head_len = c->passed_head_len; /* a refusal logs the request line and id of the head */
    int r = chunk_line_take(c, src, dst);
    if (r >= 0)
        c->head_len = 0;
    return r;
}

/* The filter between OpenSSL and evhttp: frames requests, see the module comment. */
static enum bufferevent_filter_result frame_input(struct evbuffer *src, struct evbuffer *dst,
                                                  ev_ssize_t limit,
                                                  enum bufferevent_flush_mode mode, void *arg)
{
    (void)limit;
    (void)mode;
    struct conn *c = arg;
    const struct gw_config *cfg = c->srv->cfg;
    size_t cap = (size_t)cfg->max_header_bytes;
    size_t avail;
    int moved = 0;
    while ((avail = evbuffer_get_length(src)) > 0) {
        if (c->frame == F_REJECTED) {
            evbuffer_drain(src, avail);
            break;
        }
        if (c->frame == F_BODY || c->frame == F_CHUNK_DATA) {
            size_t n = avail < c->body_left ? avail : (size_t)c->body_left;
            evbuffer_remove_buffer(src, dst, n);
            moved = 1;
            c->body_left -= n;
            if (c->body_left == 0 && c->frame == F_CHUNK_DATA) {
                c->frame = F_CHUNK_END;
            } else if (c->body_left == 0) {
                c->frame = F_HEAD;
                evtimer_del(c->timer);
            }
            continue;
        }
        if (c->frame == F_CHUNK_SIZE || c->frame == F_CHUNK_END || c->frame == F_TRAILER) {
            int r = chunk_line(c, src, dst);
            if (r < 0)
                continue; /* now F_REJECTED */
            if (r == 0) /* the rest of the line is still on its way; BEV_OK with the part
                         * left in src would have the filter call again at once, forever */
                return moved ? BEV_OK : BEV_NEED_MORE;
            moved = 1;
            continue;
        }
        if (c->head_len == 0 && c->passed > c->completed)
            return moved ? BEV_OK : BEV_NEED_MORE; /* on_resume() passes it on in turn */
        if (c->head_len == 0) {
            /* empty lines before a request line are ignored (RFC 9112 2.2) */
            unsigned char ch;
            evbuffer_copyout(src, &ch, 1);
            if (ch == '\r' || ch == '\n') {
                evbuffer_drain(src, 1);
                continue;
            }
            c->started++;
            clock_gettime(CLOCK_MONOTONIC, &c->head_t0);
            arm(c, cfg->header_timeout_ms);
        }
        size_t old = c->head_len;
        size_t want = cap - old < avail ? cap - old : avail;
        ev_ssize_t got = evbuffer_copyout(src, c->head + old, want);
        if (got <= 0)
            break;
        size_t now = old + (size_t)got, endpos = 0;
        for (size_t i = old > 3 ? old - 3 : 0; i < now && !endpos; i++) {
            if (c->head[i] != '\n')
                continue;
            if (i >= 1 && c->head[i - 1] == '\n')
                endpos = i + 1;
            else if (i >= 2 && c->head[i - 1] == '\r' && c->head[i - 2] == '\n')
                endpos = i + 1;
        }
        if (!endpos) {
            evbuffer_drain(src, (size_t)got);
            c->head_len = now;
            if (now == cap && !memchr(c->head, '\n', now))
                conn_reject(c, 414, "URI Too Long",
                            "Request line exceeds server.max_header_bytes", "uri_too_long");
            else if (now == cap)
                conn_reject(c, 431, "Request Header Fields Too Large",
                            "Request head exceeds server.max_header_bytes",
                            "request_header_too_large");
            continue;
        }
        evbuffer_drain(src, endpos - old);
        c->head_len = endpos;
        uint64_t body;
        int chunked;
        if (check_head(c, &body, &chunked) != 0)
            continue; /* now F_REJECTED */
        evbuffer_add(dst, c->head, c->head_len);
        c->passed++;
        moved = 1;
        c->passed_head_len = c->head_len;
        c->head_len = 0;
        c->body_left = body;
        c->body_total = 0;
        if (body > 0 || chunked) {
            c->frame = chunked ? F_CHUNK_SIZE : F_BODY;
            arm(c, cfg->body_timeout_ms);
        } else {
            evtimer_del(c->timer);
        }
    }
    return BEV_OK;
}

/* Responses leave evhttp as a head and a body in separate buffer chains, and the TLS layer
 * seals each chain as a record of its own with a write(2) of its own: joined first, a
 * response that fits one record costs one. */
#define ONE_RECORD_BYTES 16384

static enum bufferevent_filter_result frame_output(struct evbuffer *src, struct evbuffer *dst,
                                                   ev_ssize_t limit,
                                                   enum bufferevent_flush_mode mode, void *arg)
{
    (void)mode;
    struct conn *c = arg;
    if (!c->kicking)
        return BEV_NEED_MORE; /* on_kick() moves it, once evhttp has finished queueing */
    size_t n = evbuffer_get_length(src);
    if (limit >= 0 && (size_t)limit < n)
        n = (size_t)limit;
    if (n > 1 && n <= ONE_RECORD_BYTES)
        evbuffer_pullup(src, (ev_ssize_t)n);
    return evbuffer_remove_buffer(src, dst, n) >= 0 ? BEV_OK : BEV_ERROR;
}

/* Passes on a pipelined request held back while the reply before it was under way. Runs
 * from the loop after evhttp has finished that reply and, keeping the connection, is
 * reading again: it reads nothing more from the TLS layer by itself, since what the filter
 * held is already there. */
static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    if (!evhttp_holds(c) || c->closing || c->frame == F_REJECTED ||
        evbuffer_get_length(bufferevent_get_input(c->ssl_bev)) == 0)
        return;
    bufferevent_flush(c->bev, EV_READ, BEV_NORMAL);
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
        bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS);
}

/* Response bytes leave the filter only from here, run from the loop after evhttp has
 * queued them. Two things need that. evhttp queues a response before it enables writing,
 * and a 2.1 filter passes output on only when writing is enabled (and not when it gets
 * enabled). And evhttp sets the callback that completes a request after it queues the
 * request's last bytes: passed on at once, the filter would report them written before
 * that callback is set, and the request would never complete.
 *
 * This is a plain event of ours rather than evbuffer_defer_callbacks() on the filter's
 * output: a deferred evbuffer callback holds a reference to the filter, and when evhttp
 * frees the filter while one is pending, that callback drops the last reference and
 * libevent 2.1 runs the filter's finalizer with the evbuffer as its argument (a crash in
 * bufferevent_finalize_cb_ when many clients leave at once). */
static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    if (!evhttp_holds(c))
        return; /* being finalized: conn_free() follows */
    /* the flush holds a reference to the filter: should evhttp free the connection from
     * the write callback, the filter (and c) outlive this call */
    c->kicking = 1;
    bufferevent_flush(c->bev, EV_WRITE, BEV_NORMAL);
    c->kicking = 0;
}

static void on_filter_output(struct evbuffer *buf, const struct evbuffer_cb_info *info,
                             void *arg)
{
    (void)buf;
    struct conn *c = arg;
    if (info->n_added)
        event_active(c->kick, EV_WRITE, 0);
}

/* evhttp asks for each new connection's bufferevent; the socket is set by evhttp. */
static struct bufferevent *on_bev(struct event_base *base, void *arg)
{
    gw_server *srv = arg;
    struct conn *c = calloc(1, sizeof *c);
    SSL *ssl = NULL;
    if (!c)
        goto fail;
    c->srv = srv;
    c->head = malloc((size_t)srv->cfg->max_header_bytes);
    c->timer = evtimer_new(base, on_conn_timer, c);
    c->kick = event_new(base, -1, 0, on_kick, c);
    c->resume = event_new(base, -1, 0, on_resume, c);
    ssl = SSL_new(srv->ssl);
    if (!c->head || !c->timer || !c->kick || !c->resume || !ssl)
        goto fail;
    SSL_set_ex_data(ssl, ssl_conn_index, c);
    SSL_set_info_callback(ssl, on_ssl_info);
    c->ssl_bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                BEV_OPT_CLOSE_ON_FREE);
    if (!c->ssl_bev)
        goto fail;
    ssl = NULL; /* owned by ssl_bev */
    bufferevent_openssl_set_allow_dirty_shutdown(c->ssl_bev, 1);
    c->out_cb = evbuffer_add_cb(bufferevent_get_output(c->ssl_bev), on_ssl_output, c);
    if (!c->out_cb)
        goto fail;
    c->bev = bufferevent_filter_new(c->ssl_bev, frame_input, frame_output,
                                    BEV_OPT_CLOSE_ON_FREE, conn_free, c);
    if (!c->bev)
        goto fail;
    /* from here on, freeing the filter frees the rest (conn_free) */
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    c->kick_cb = evbuffer_add_cb(bufferevent_get_output(c->bev), on_filter_output, c);
    if (!c->kick_cb) {
        gw_log(GW_LOG_ERROR, "out of memory accepting a connection");
        bufferevent_free(c->bev);
        return NULL; /* as below */
    }
    update_accepting(srv);
    /* a client that never finishes the TLS handshake holds its connection (one of
     * server.max_connections) for header_timeout_ms, not the idle timeout */
    c->handshaking = 1;
    arm(c, srv->cfg->header_timeout_ms);
    return c->bev;
fail:
    gw_log(GW_LOG_ERROR, "out of memory accepting a connection");
    if (c) {
        if (c->ssl_bev)
            bufferevent_free(c->ssl_bev);
        if (c->timer)
            event_free(c->timer);
        if (c->kick)
            event_free(c->kick);
        if (c->resume)
            event_free(c->resume);
        free(c->head);
        free(c);
    }
    SSL_free(ssl);
    /* evhttp falls back to a plain socket bufferevent; the client's TLS handshake fails
     * against it and the connection is dropped */
    return NULL;
}

/* Whether a reply answered is still on its way out of c (closing it would cut the reply). */
static int conn_sending(struct conn *c)
{
    return evbuffer_get_length(bufferevent_get_output(c->ssl_bev)) ||
           (c->bev && evbuffer_get_length(bufferevent_get_output(c->bev)));
}

/* At server.max_connections, while a client waits in the backlog, the keep-alive
 * connection idle the longest (one that has been answered and sent nothing since) is closed
 * to make room, as a browser or a proxy would reopen it: idle clients could otherwise hold
 * every place (and /health with them) for idle_timeout_ms. 1 when one is closing. */
static int reclaim_idle(gw_server *srv)
{
    struct conn *oldest = NULL;
    for (struct conn *c = srv->conns; c; c = c->next) {
        if (c->reclaimed && c->closing)
            return 1; /* one is on its way out */
        if (c->closing || c->close_when_flushed || c->handshaking || c->cur || !c->completed ||
            c->started != c->completed || c->head_len || c->frame != F_HEAD)
            continue;
        if (conn_sending(c)) /* (not idle) */
            continue;
        if (!oldest || c->idle_since.tv_sec < oldest->idle_since.tv_sec ||
            (c->idle_since.tv_sec == oldest->idle_since.tv_sec &&
             c->idle_since.tv_nsec < oldest->idle_since.tv_nsec))
            oldest = c;
    }
    if (!oldest)
        return 0;
    gw_log(GW_LOG_DEBUG, "server.max_connections reached: closing the connection idle longest");
    oldest->reclaimed = 1;
    conn_close(oldest);
    return 1;
}

/* While accepting is paused at server.max_connections: a client waiting in the backlog
 * (the listening socket readable) gets the place of the connection idle the longest. */
static void on_reclaim_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gw_server *srv = arg;
    if (!srv->accept_paused || !srv->listener || srv->draining)
        return;
    struct pollfd p = {evconnlistener_get_fd(srv->listener), POLLIN, 0};
    if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
        reclaim_idle(srv);
}

/* At server.max_connections the server stops accepting: new clients wait in the kernel's
 * backlog instead of being reset, and accepting resumes when a connection closes (one idle
 * the longest is closed for a client that waits: on_reclaim_check()). */
static void update_accepting(gw_server *srv)
{
    if (!srv->listener)
        return;
    int full = srv->nconns >= srv->cfg->max_connections;
    if (full && !srv->accept_paused) {
        srv->accept_paused = 1;
        evconnlistener_disable(srv->listener);
        struct timeval every = {0, 100000};
        if (srv->reclaim_check)
            event_add(srv->reclaim_check, &every);
        gw_metric_add(srv->m_paused, 1);
        gw_log(GW_LOG_WARN, "server.max_connections (%lld) reached: accepting paused",
               (long long)srv->cfg->max_connections);
    } else if (!full && srv->accept_paused) {
        srv->accept_paused = 0;
        if (srv->reclaim_check)
            event_del(srv->reclaim_check);
        if (!srv->fd_paused)
            evconnlistener_enable(srv->listener);
    }
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gw_server *srv = arg;
    srv->fd_paused = 0;
    if (srv->listener && !srv->accept_paused && !srv->draining)
        evconnlistener_enable(srv->listener);
}

/* accept() failed. Out of file descriptors (the open-file limit) the listening socket stays
 * readable, and trying again at once would spin: accepting pauses for 250 ms, and the log
 * says so at most every 10 s. Other failures (a connection reset before it was taken) pass. */
static gw_server *accepting_srv; /* the error callback gets the evhttp's argument */

static void on_accept_error(struct evconnlistener *l, void *arg)
{
    (void)arg;
    gw_server *srv = accepting_srv;
    int e = errno;
    srv->accept_failures++;
    gw_metric_add(srv->m_accept_failed, 1);
    int out = e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
    if (out) {
        evconnlistener_disable(l);
        srv->fd_paused = 1;
        struct timeval tv = {0, 250000};
        evtimer_add(srv->accept_retry, &tv);
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (srv->accept_failures_logged && now.tv_sec - srv->t_accept_log.tv_sec < 10)
        return;
    struct rlimit rl = {0, 0};
    getrlimit(RLIMIT_NOFILE, &rl);
    gw_log(GW_LOG_WARN, "accepting a connection failed: %s%s (%ld connections open, "
           "open-file limit %lld; %ld failures so far)", strerror(e),
           out ? "; accepting paused for 250 ms: raise the limit (ulimit -n, LimitNOFILE=) or "
                 "lower server.max_connections" : "",
           srv->nconns, (long long)rl.rlim_cur, srv->accept_failures);
    srv->accept_failures_logged = srv->accept_failures;
    srv->t_accept_log = now;
}

/* The guard's known words (gw_guard_known_words()): cache.guard_words and the embedding
 * model's vocabulary, read once per process, before any thread checks a pair. Without the
 * list the guard still works, reading fewer misspellings: a warning, not an error. */
static void load_guard_words(const struct gw_config *cfg)
{
    static int done;
    if (done || !cfg->cache_guard || !cfg->cache_guard_words[0]) return;
    done = 1;
    char err[512], vocab[4096];
    if (gw_guard_known_words(cfg->cache_guard_words, err, sizeof err)) {
        gw_log_kv(GW_LOG_WARN, "cache.guard_words not loaded: the guard reads no misspelling "
                  "but its own few forms", "error", err, NULL);
        return;
    }
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", cfg->embedder_model);
    if (gw_guard_known_words(vocab, err, sizeof err))
        gw_log_kv(GW_LOG_WARN, "the embedding model's vocabulary is not among the guard's "
                  "known words", "error", err, NULL);
}

/* The open-file limit: the soft one raised as far as the connections need (the hard one
 * allows), and a warning where it stays below them. */
static void fit_open_files(const struct gw_config *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl))
        return;
    const rlim_t reserve = 256; /* the store, models, threads' descriptors, the CLI's */
    rlim_t want = (rlim_t)cfg->max_connections + reserve;
    long open_now = 0; /* descriptors open now */
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *de; d && (de = readdir(d));)
        open_now += de->d_name[0] != '.';
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        struct rlimit up = rl;
        up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (!setrlimit(RLIMIT_NOFILE, &up))
            rl = up;
    }
    if (d)
        closedir(d);
    long left = (long)rl.rlim_cur - open_now - 16;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
        gw_log(GW_LOG_WARN, "the open-file limit (%lld, hard %lld) is below server.max_connections "
               "(%lld) + %d: connections beyond about %ld wait until others close; raise it "
               "(ulimit -n, LimitNOFILE=) or lower server.max_connections",
               (long long)rl.rlim_cur, (long long)rl.rlim_max, (long long)cfg->max_connections,
               (int)reserve, left > 0 ? left : 0);
}

/* ------------------------------------------------------------------ requests */

static void req_finish(struct gw_req *rc, int client_gone)
{
    gw_server *srv = rc->srv;
    if (rc->hangup) {
        event_free(rc->hangup);
        rc->hangup = NULL;
    }
    double ms = since_ms(&rc->t0);
    int status = client_gone ? 499 : rc->status; /* nginx's "client closed request" */
    char st[8];
    snprintf(st, sizeof st, "%d", status);
    gw_metric_add(srv->m_requests, 1, rc->route, st);
    gw_metric_observe(srv->m_latency, ms / 1000.0, rc->route, st);
    /* (rc->req may be gone with its client by now: nothing here reads it) */
    gw_log_access(rc->id, rc->method, rc->route, strcmp(rc->route, "unmatched") ? NULL : rc->path,
                  status, rc->failed, ms, rc->peer[0] ? rc->peer : NULL,
                  rc->tenant[0] ? rc->tenant : NULL, rc->key[0] ? rc->key : NULL,
                  rc->cache[0] ? rc->cache : NULL);
    if (rc->conn) {
        clock_gettime(CLOCK_MONOTONIC, &rc->conn->idle_since);
        rc->conn->completed++;
        rc->conn->cur = NULL;
        rc->conn = NULL;
    }
    if (client_gone && rc->deferred) {
        /* a reply handed over whole (its handler is done with it, and its state may be
         * freed) leaves nothing to cancel and nobody to call gw_req_gone() */
        if (rc->on_gone && !rc->replied)
            rc->on_gone(rc->gone_arg);
        /* evhttp detaches a request whose reply is unfinished when its client leaves, and
         * then it is ours to free (on_evcon_close decided which case this is) */
        if (rc->req && rc->own_req)
            evhttp_request_free(rc->req);
        rc->req = NULL;
        if (!rc->replied) {
            rc->gone = 1; /* freed by gw_req_gone() when the deferred work completes */
            return;
        }
    }
    free(rc);
}

/* Whether evhttp would close the connection after this response. */
static int wants_close(struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *ci = evhttp_find_header(in, "Connection");
    const char *co = evhttp_find_header(evhttp_request_get_output_headers(req), "Connection");
    if ((ci && strcasestr(ci, "close")) || (co && strcasestr(co, "close")))
        return 1;
    return (req->major < 1 || (req->major == 1 && req->minor == 0)) &&
           !(ci && strcasestr(ci, "keep-alive"));
}

/* Runs before evhttp decides whether to keep the connection: when it is to close, the
 * decision is taken from evhttp (it would free the connection before the TLS layer
 * has sent the response) and carried out by close_when_flushed(). */
static void on_complete(struct evhttp_request *req, void *arg)
{
    struct gw_req *rc = arg;
    struct conn *c = rc->conn;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (rc->long_timeout && evcon) {
        struct timeval tv = ms_tv(rc->srv->cfg->idle_timeout_ms);
        evhttp_connection_set_timeout_tv(evcon, &tv);
    }
    if (c && (wants_close(req) || rc->srv->draining)) {
        struct evkeyvalq *in = evhttp_request_get_input_headers(req);
        evhttp_remove_header(in, "Connection");
        evhttp_add_header(in, "Connection", "keep-alive");
        evhttp_remove_header(evhttp_request_get_output_headers(req), "Connection");
        close_when_flushed(c);
    }
    req_finish(rc, 0);
    if (c && !c->close_when_flushed)
        event_active(c->resume, EV_READ, 0);
}

/* The request's Origin when server.cors_origins allows it (a browser page may read the
 * response), else NULL. */
static const char *cors_origin(struct gw_req *rc)
{
    const char *list = rc->srv->cfg->cors_origins;
    if (!*list) /* off: every response asks nothing more */
        return NULL;
    const char *origin = evhttp_find_header(evhttp_request_get_input_headers(rc->req), "Origin");
    if (!origin)
        return NULL;
    size_t ol = strlen(origin);
    for (const char *p = list; *p;) {
        p += strspn(p, " ,");
        size_t n = strcspn(p, ",");
        size_t m = n;
        while (m && p[m - 1] == ' ')
            m--;
        if ((m == 1 && *p == '*') || (m == ol && !strncasecmp(p, origin, ol)))
            return origin;
        p += n;
    }
    return NULL;
}

/* What a browser page may read of a response from an allowed origin. With origins
 * configured, every response says it varies by Origin (also one to no origin or another
 * one, which a shared cache must not give an allowed page, nor the reverse). */
static void cors_headers(struct gw_req *rc, struct evkeyvalq *h)
{
    if (*rc->srv->cfg->cors_origins)
        evhttp_add_header(h, "Vary", "Origin");
    const char *origin = cors_origin(rc);
    if (!origin)
        return;
    evhttp_add_header(h, "Access-Control-Allow-Origin", origin);
    evhttp_add_header(h, "Access-Control-Expose-Headers",
                      "X-Request-Id, X-Cache, X-Cache-Kind, X-Cache-Similarity, X-Cache-Entry, "
                      "X-Cache-Nearest, X-Cache-Miss-Reason, Retry-After, "
                      "x-ratelimit-limit-requests, x-ratelimit-remaining-requests, "
                      "x-ratelimit-reset-requests, x-ratelimit-limit-tokens, "
                      "x-ratelimit-remaining-tokens, x-ratelimit-reset-tokens");
}

/* A request a browser sent for a page of another origin that server.cors_origins does not
 * allow, one that does something (not a GET, HEAD or OPTIONS): refused, as Ollama refuses
 * it. Such a page may send a "simple" POST (a text/plain body, read as JSON here) without
 * asking first; it cannot read the answer, but it would spend the server's compute, and
 * with auth off (a server on a loopback address) as the local user. Clients other than
 * browsers send no Origin. */
static int foreign_page(struct gw_req *rc, enum evhttp_cmd_type cmd)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(rc->req);
    const char *origin = evhttp_find_header(in, "Origin");
    if (!origin || cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD ||
        cmd == EVHTTP_REQ_OPTIONS || cors_origin(rc))
        return 0;
    /* the server's own origin (https://HOST, HOST as the request names it) */
    const char *host = evhttp_find_header(in, "Host");
    return !(host && !strncasecmp(origin, "https://", 8) && !strcasecmp(origin + 8, host));
}

/* A browser's preflight (OPTIONS with Access-Control-Request-Method) from an allowed
 * origin: 204 with what the route allows. 0 when the request is not one. */
static int cors_preflight(struct gw_req *rc, const char *allow)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(rc->req);
    if (evhttp_request_get_command(rc->req) != EVHTTP_REQ_OPTIONS ||
        !evhttp_find_header(in, "Access-Control-Request-Method") || !cors_origin(rc))
        return 0;
    struct evkeyvalq *h = evhttp_request_get_output_headers(rc->req);
    const char *asked = evhttp_find_header(in, "Access-Control-Request-Headers");
    evhttp_add_header(h, "Access-Control-Allow-Methods", allow);
    /* the SDKs send headers of their own (x-stainless-...): what the page asks for */
    evhttp_add_header(h, "Access-Control-Allow-Headers",
                      asked ? asked : "Authorization, Content-Type");
    evhttp_add_header(h, "Access-Control-Max-Age", "600");
    gw_reply_body(rc, 204, "text/plain", "", 0);
    return 1;
}

/* The headers of every response. evhttp adds Date to HTTP/1.1 responses only. */
static void common_headers(struct gw_req *rc, struct evkeyvalq *h)
{
    cors_headers(rc, h);
    evhttp_add_header(h, "X-Request-Id", rc->id);
    evhttp_add_header(h, "Server", "cachegate/" GW_VERSION);
    char date[64];
    if (rc->req->major == 1 && rc->req->minor == 0 && http_date(date, sizeof date))
        evhttp_add_header(h, "Date", date);
    /* "Connection: keep-alive, close" closes too (wants_close()), and says so as evhttp says
     * it for a bare "close" (which it replaces with its own) */
    const char *ci = evhttp_find_header(evhttp_request_get_input_headers(rc->req), "Connection");
    if (ci && strcasestr(ci, "close") && strcasecmp(ci, "close") &&
        !evhttp_find_header(h, "Connection"))
        evhttp_add_header(h, "Connection", "close");
}

/* The reason phrase of a status this server sends that evhttp's own table lacks (its 4xx
 * end at 417, its 5xx at 505), else NULL (evhttp's). */
static const char *reason(int status)
{
    return status == 429 ? "Too Many Requests" : status == 507 ? "Insufficient Storage" : NULL;
}

static void send_body(struct gw_req *rc, int status, const char *ctype, const char *body,
                      size_t len)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(rc->req);
    evhttp_add_header(h, "Content-Type", ctype);
    common_headers(rc, h);
    if (rc->srv->draining && !evhttp_find_header(h, "Connection"))
        evhttp_add_header(h, "Connection", "close");
    struct evbuffer *b = evbuffer_new();
    if (evhttp_request_get_command(rc->req) == EVHTTP_REQ_HEAD) {
        /* the GET's length, no body: evhttp would send one */
        char n[24];
        snprintf(n, sizeof n, "%zu", len);
        evhttp_add_header(h, "Content-Length", n);
    } else if (b) {
        evbuffer_add(b, body, len);
    }
    rc->status = status;
    rc->replied = 1;
    evhttp_send_reply(rc->req, status, reason(status), b);
    if (b)
        evbuffer_free(b);
}

void gw_reply_json(struct gw_req *rc, int status, json_t *body, size_t flags)
{
    char *s = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER | flags);
    json_decref(body);
    if (!s) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        send_body(rc, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    send_body(rc, status, "application/json", s, strlen(s));
    free(s);
}

void gw_reply_body(struct gw_req *rc, int status, const char *ctype, const char *body,
                   size_t len)
{
    send_body(rc, status, ctype, body, len);
}

static void send_json(struct gw_req *rc, int status, json_t *body /* takes ownership */)
{
    gw_reply_json(rc, status, body, 0);
}

void gw_reply_error(struct gw_req *rc, int status, const char *message, const char *param,
                    const char *code)
{
    gw_reply_error_type(rc, status, message, param, code, oai_error_type(status, code));
}

void gw_reply_error_type(struct gw_req *rc, int status, const char *message, const char *param,
                         const char *code, const char *type)
{
    /* The SDKs retry a 5xx and a 429 twice unless told not to, as OpenAI's servers tell them:
     * a miss that only-if-cached asked for, a generation that ran out of time (run again, it
     * would for as long) and a month's spent quota answer the same when asked again. */
    if (code && (!strcmp(code, "cache_miss") || !strcmp(code, "timeout") ||
                 !strcmp(code, "insufficient_quota")))
        gw_reply_header(rc, "x-should-retry", "false");
    send_json(rc, status, oai_error(message, type, param, code));
}

const char *gw_req_body(struct gw_req *rc, size_t *len)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(rc->req);
    *len = evbuffer_get_length(in);
    return *len ? (const char *)evbuffer_pullup(in, -1) : "";
}

gw_cq *gw_server_cq(gw_server *srv)
{
    return srv->cq;
}

json_t *gw_req_json_body(struct gw_req *rc)
{
    return gw_req_json_body_flags(rc, 0);
}

json_t *gw_req_json_body_flags(struct gw_req *rc, size_t flags)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(rc->req);
    size_t len = evbuffer_get_length(in);
    /* parsed as JSON whatever the Content-Type says: curl -d sends form encoding; past a
     * UTF-8 byte order mark (curl --data-binary @file of a file a Windows editor saved) */
    json_error_t je;
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    if (len >= 3 && !memcmp(body, "\xEF\xBB\xBF", 3)) {
        body += 3;
        len -= 3;
    }
    json_t *j = len ? json_loadb(body, len, flags, &je) : NULL;
    if (!json_is_object(j)) {
        char msg[300];
        if (!len)
            snprintf(msg, sizeof msg, "The request body is empty; send a JSON object.");
        else if (!j && json_error_code(&je) == json_error_null_character)
            snprintf(msg, sizeof msg, "The JSON body of your request holds a \\u0000 (a NUL "
                     "character), which this server does not accept (line %d, column %d).",
                     je.line, je.column);
        else if (!j)
            snprintf(msg, sizeof msg, "We could not parse the JSON body of your request: %s "
                     "(line %d, column %d).", je.text, je.line, je.column);
        else
            snprintf(msg, sizeof msg, "The request body must be a JSON object.");
        json_decref(j);
        gw_reply_error(rc, 400, msg, NULL, "invalid_json");
        return NULL;
    }
    return j;
}

#define HANGUP_POLL_MS 200

/* evhttp stops reading while a request is being answered, so it would only notice a
 * client that hung up when the reply is written. A deferred request polls its socket for
 * the peer's shutdown instead, so that abandoned work (a long generation) is cancelled. */
static void on_hangup_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct gw_req *rc = arg;
    struct conn *c = rc->conn;
    if (!c)
        return;
    struct pollfd p = {bufferevent_getfd(c->ssl_bev), POLLRDHUP, 0};
    if (p.fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        conn_close(c); /* evhttp frees the connection; req_finish() sees the client gone */
        return;
    }
    struct timeval tv = ms_tv(HANGUP_POLL_MS);
    evtimer_add(rc->hangup, &tv);
}

void gw_req_defer(struct gw_req *rc)
{
    rc->deferred = 1;
    /* the connection's idle timeout must not cut a reply that waits for the engine: the
     * request's own timeout bounds it; on_complete() restores the idle one */
    struct evhttp_connection *evcon = evhttp_request_get_connection(rc->req);
    if (evcon) {
        struct timeval tv = ms_tv(rc->srv->cfg->engine_request_timeout_ms +
                                  rc->srv->cfg->idle_timeout_ms);
        evhttp_connection_set_timeout_tv(evcon, &tv);
        rc->long_timeout = 1;
    }
    if (!rc->hangup && rc->conn &&
        (rc->hangup = evtimer_new(rc->srv->base, on_hangup_poll, rc))) {
        struct timeval tv = ms_tv(HANGUP_POLL_MS);
        evtimer_add(rc->hangup, &tv);
    }
}

void gw_req_on_gone(struct gw_req *rc, void (*fn)(void *arg), void *arg)
{
    rc->on_gone = fn;
    rc->gone_arg = arg;
}

void gw_req_on_cut(struct gw_req *rc, void (*fn)(void *arg), void *arg)
{
    rc->on_cut = fn;
    rc->cut_arg = arg;
}

void gw_reply_retry_after(struct gw_req *rc, int seconds)
{
    char v[16];
    snprintf(v, sizeof v, "%d", seconds);
    evhttp_add_header(evhttp_request_get_output_headers(rc->req), "Retry-After", v);
}

void gw_req_set_tenant(struct gw_req *rc, const char *tenant, const char *key)
{
    snprintf(rc->tenant, sizeof rc->tenant, "%s", tenant ? tenant : "");
    snprintf(rc->key, sizeof rc->key, "%.12s", key ? key : ""); /* as keys are listed */
}

void gw_reply_sse_start(struct gw_req *rc)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(rc->req);
    evhttp_add_header(h, "Content-Type", "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    common_headers(rc, h);
    if (rc->req->major == 1 && rc->req->minor == 0) {
        /* HTTP/1.0 has no chunks: the stream ends with the connection (evhttp would frame
         * a keep-alive reply with Content-Length: 0 and then send the events anyway) */
        evhttp_remove_header(evhttp_request_get_input_headers(rc->req), "Connection");
        evhttp_remove_header(h, "Connection");
        evhttp_add_header(h, "Connection", "close");
    }
    rc->status = 200;
    evhttp_send_reply_start(rc->req, 200, NULL);
}

void gw_reply_sse_event(struct gw_req *rc, const char *event, json_t *body)
{
    char *s = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(body);
    struct evbuffer *b = evbuffer_new();
    if (s && b) {
        if (event)
            evbuffer_add_printf(b, "event: %s\n", event);
        evbuffer_add_printf(b, "data: %s\n\n", s);
        evhttp_send_reply_chunk(rc->req, b);
    }
    if (b)
        evbuffer_free(b);
    free(s);
}

void gw_reply_sse_json(struct gw_req *rc, json_t *body)
{
    gw_reply_sse_event(rc, NULL, body);
}

void gw_reply_sse_finish(struct gw_req *rc)
{
    rc->replied = 1;
    evhttp_send_reply_end(rc->req);
}

void gw_req_failed(struct gw_req *rc, int status)
{
    rc->failed = status;
}

void gw_reply_sse_end(struct gw_req *rc)
{
    struct evbuffer *b = evbuffer_new();
    if (b) {
        evbuffer_add_printf(b, "data: [DONE]\n\n");
        evhttp_send_reply_chunk(rc->req, b);
        evbuffer_free(b);
    }
    gw_reply_sse_finish(rc);
}

struct event_base *gw_server_base(gw_server *srv)
{
    return srv->base;
}

const struct gw_llm *gw_server_llm(gw_server *srv)
{
    return &srv->llm;
}

int gw_req_gone(struct gw_req *rc)
{
    if (!rc->gone)
        return 0;
    free(rc);
    return 1;
}

gw_server *gw_req_server(struct gw_req *rc)
{
    return rc->srv;
}

const struct gw_config *gw_server_config(gw_server *srv)
{
    return srv->cfg;
}

emb_model *gw_server_embedder(gw_server *srv)
{
    return srv->emb;
}

const gw_otok *gw_server_openai_tokenizer(gw_server *srv)
{
    return srv->otok;
}

gw_embedw *gw_server_embed_worker(gw_server *srv)
{
    return srv->embw;
}

#define DB_LOST                                                                            \
    "store: the database file the server writes was deleted or replaced: what it writes "   \
    "now is lost at the next start"

/* Whether the database file the store has open is no longer the one at its path (deleted,
 * or replaced, by a restore run beside the server, say); said in the log once it is seen,
 * and in cachegate_store_database_lost. */
static int db_lost(gw_server *srv)
{
    char db[4096];
    struct stat st;
    snprintf(db, sizeof db, "%s/cachegate.db", srv->cfg->data_dir);
    int lost = srv->st && srv->db_ino &&
               (stat(db, &st) || st.st_ino != srv->db_ino || st.st_dev != srv->db_dev);
    if (lost && !srv->db_lost)
        gw_log_kv(GW_LOG_ERROR, DB_LOST, "path", db, NULL);
    srv->db_lost = lost;
    gw_metric_set(srv->m_db_lost, lost);
    return lost;
}

static void on_db_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    db_lost(arg);
}

/* What /health says is wrong while the server still answers: a store write failed in the
 * last minute (the disk full, say), or the database file was deleted or replaced under it
 * (what it writes then is lost at the next start). NULL: nothing. */
static json_t *health_problems(gw_server *srv)
{
    json_t *a = json_array();
    long long failed = atomic_load(&srv->store_failed_ms);
    if (failed && store_now_ms() - failed < 60000) {
        char what[400];
        pthread_mutex_lock(&srv->store_failed_mu);
        snprintf(what, sizeof what, "store: a write failed in the last minute: %s",
                 srv->store_failed_what);
        pthread_mutex_unlock(&srv->store_failed_mu);
        json_array_append_new(a, json_string(what));
    }
    if (db_lost(srv))
        json_array_append_new(a, json_string(DB_LOST));
    if (json_array_size(a))
        return a;
    json_decref(a);
    return NULL;
}

static void handle_health(struct gw_req *rc)
{
    gw_server *srv = rc->srv;
    json_t *o = json_object(), *problems = health_problems(srv);
    /* degraded still answers 200: the server serves; a balancer should not take it out */
    json_object_set_new(o, "status", json_string(srv->draining ? "draining"
                                                 : problems  ? "degraded"
                                                             : "ok"));
    if (problems)
        json_object_set_new(o, "problems", problems);
    json_object_set_new(o, "version", json_string(GW_VERSION));
    json_object_set_new(o, "uptime_s", json_real(floor(since_ms(&srv->t_start)) / 1000.0));
    json_object_set_new(o, "device", json_string(srv->dev->description));
    gw_reply_json(rc, srv->draining ? 503 : 200, o, JSON_REAL_PRECISION(12));
}

static void handle_metrics(struct gw_req *rc)
{
    gw_server *srv = rc->srv;
    if (srv->cfg->metrics_auth && !gw_admin_ok(rc)) /* tenants' names and traffic */
        return;
    gw_metric_set(srv->m_conns, (double)srv->nconns);
    db_lost(srv);
    gw_metric_set(srv->m_uptime, since_ms(&srv->t_start) / 1000.0);
    if (srv->cache)
        gw_cache_refresh_metrics(srv->cache, srv->tenants);
    size_t len;
    char *text = gw_metrics_render(srv->metrics, &len);
    if (!text) {
        gw_reply_error(rc, 500, "out of memory rendering metrics", NULL, NULL);
        return;
    }
    send_body(rc, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}

static json_t *model_entry(const char *id, const char *path)
{
    struct stat st;
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(id));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(stat(path, &st) == 0 ? st.st_mtime : 0));
    json_object_set_new(m, "owned_by", json_string("cachegate"));
    return m;
}

static void handle_models(struct gw_req *rc)
{
    struct gw_tenant *tn = gw_tenants_auth(rc->srv->tenants, rc);
    if (!tn)
        return;
    const struct gw_config *cfg = rc->srv->cfg;
    json_t *data = json_array();
    if (gw_tenant_allows(tn, cfg->engine_model_name)) /* those of the tenant's policy */
        json_array_append_new(data, model_entry(cfg->engine_model_name, cfg->engine_model));
    if (gw_tenant_allows(tn, cfg->embedder_model_name))
        json_array_append_new(data, model_entry(cfg->embedder_model_name, cfg->embedder_model));
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    send_json(rc, 200, o);
}

/* GET /v1/models/{model}: one of the models, or 404 model_not_found */
static void handle_model(struct gw_req *rc)
{
    struct gw_tenant *tn = gw_tenants_auth(rc->srv->tenants, rc);
    if (!tn)
        return;
    const struct gw_config *cfg = rc->srv->cfg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(rc->req);
    size_t idlen = 0;
    char *id = evhttp_uridecode(evhttp_uri_get_path(uri) + strlen("/v1/models/"), 0, &idlen);
    if (!id) {
        gw_reply_error(rc, 503, "Out of memory; try again.", NULL, NULL);
        return;
    }
    if (strlen(id) != idlen) { /* %00: no model's name holds a NUL */
        gw_reply_error(rc, 404, "No model has a name with a NUL byte (%00) in it.", "model",
                       "model_not_found");
    } else if (gw_tenants_model_ok(tn, rc, id)) {
        /* not the tenant's: answered 404 model_not_found */
    } else if (!strcmp(id, cfg->engine_model_name)) {
        send_json(rc, 200, model_entry(cfg->engine_model_name, cfg->engine_model));
    } else if (!strcmp(id, cfg->embedder_model_name)) {
        send_json(rc, 200, model_entry(cfg->embedder_model_name, cfg->embedder_model));
    } else {
        char msg[320];
        snprintf(msg, sizeof msg, "The model `%.200s` does not exist.", id);
        gw_reply_error(rc, 404, msg, "model", "model_not_found");
    }
    free(id);
}

#define GET_HEAD (EVHTTP_REQ_GET | EVHTTP_REQ_HEAD)

static const struct route routes[] = {
    {"/health", GET_HEAD, "GET, HEAD", handle_health, NULL, 0},
    {"/metrics", GET_HEAD, "GET, HEAD", handle_metrics, NULL, 0},
    {"/v1/models", GET_HEAD, "GET, HEAD", handle_models, NULL, 0},
    {"/v1/models/", GET_HEAD, "GET, HEAD", handle_model, "/v1/models/{model}", 0},
    {"/v1/embeddings", EVHTTP_REQ_POST, "POST", gw_handle_embeddings, NULL, 0},
    {"/v1/chat/completions", EVHTTP_REQ_POST | GET_HEAD, "GET, HEAD, POST",
     gw_handle_chat_completions, NULL, 0},
    {"/v1/chat/completions/", GET_HEAD | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE,
     "GET, HEAD, POST, DELETE", gw_handle_stored_chat, "/v1/chat/completions/{id}", 0},
    {"/v1/completions", EVHTTP_REQ_POST, "POST", gw_handle_completions, NULL, 0},
    {"/v1/responses", EVHTTP_REQ_POST, "POST", gw_handle_responses, NULL, 0},
    {"/v1/responses/input_tokens", EVHTTP_REQ_POST, "POST", gw_handle_response_input_tokens, NULL,
     0},
    {"/v1/responses/", GET_HEAD | EVHTTP_REQ_DELETE, "GET, HEAD, DELETE", gw_handle_response_by_id,
     "/v1/responses/{id}", 1},
    {"/admin/cache", GET_HEAD | EVHTTP_REQ_DELETE, "GET, HEAD, DELETE", gw_handle_admin_cache,
     NULL, 0},
    {"/admin/cache/import", EVHTTP_REQ_POST, "POST", gw_handle_admin_cache_import, NULL, 0},
    {"/admin/tenants", EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE,
     "GET, POST, PUT, DELETE", gw_handle_admin_tenants, NULL, 0},
    {"/admin/keys", EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE, "GET, POST, DELETE",
     gw_handle_admin_keys, NULL, 0},
    {"/admin/usage", EVHTTP_REQ_GET, "GET", gw_handle_admin_usage, NULL, 0},
};

/* An id: the prefix and 24 hex digits from the CSPRNG, drawn 4 KiB at a time (a RAND_bytes
 * call and twelve snprintf calls per request were 4% of a cache hit's time). Event loop
 * only. */
void gw_make_id(char out[48], const char *prefix)
{
    static unsigned char pool[4096];
    static size_t used = sizeof pool;
    static const char hex[] = "0123456789abcdef";
    if (used + 12 > sizeof pool) {
        if (RAND_bytes(pool, sizeof pool) != 1) {
            /* (no randomness to be had: ids unique still, from the clock and a count) */
            static uint64_t count;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t x = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
            for (size_t i = 0; i + 12 <= sizeof pool; i += 12) {
                uint64_t c = ++count;
                memcpy(pool + i, &x, 8);
                memcpy(pool + i + 8, &c, 4);
            }
        }
        used = 0;
    }
    size_t k = strlen(prefix);
    memcpy(out, prefix, k);
    for (int i = 0; i < 12; i++) {
        unsigned char r = pool[used + (size_t)i];
        out[k++] = hex[r >> 4];
        out[k++] = hex[r & 15];
    }
    out[k] = 0;
    memset(pool + used, 0, 12); /* an id's bytes are not kept once used */
    used += 12;
}

/* A request's id: random, as an answer's is, so that the ids one tenant sees say nothing of
 * how many requests others sent between its own (a counter did). */
static void next_request_id(char *buf, size_t len)
{
    char id[48];
    gw_make_id(id, "req_");
    snprintf(buf, len, "%s", id);
}

/* A client-supplied X-Request-Id is kept when it is short and plain. */
static int plain_id(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char ch = s[n];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.'))
            return 0;
    }
    return n > 0 && n < 48;
}

/* evhttp is about to free a connection. A deferred request still attached to it is freed
 * by evhttp right after; one it detached (its client left mid-reply) is left to us. */
static void on_evcon_close(struct evhttp_connection *evcon, void *arg)
{
    struct conn *c = arg;
    struct gw_req *rc = c->cur;
    if (!rc || !rc->deferred || !rc->req)
        return;
    if (evhttp_request_get_connection(rc->req) == evcon)
        rc->req = NULL;
    else
        rc->own_req = 1;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    gw_server *srv = arg;
    struct gw_req *rc = calloc(1, sizeof *rc);
    if (!rc) {
        evhttp_send_error(req, 503, "out of memory");
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &rc->t0);
    rc->srv = srv;
    rc->req = req;
    rc->method = method_name(evhttp_request_get_command(req));
    rc->route = "unmatched";

    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *fbev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    struct bufferevent *sbev = fbev ? bufferevent_get_underlying(fbev) : NULL;
    SSL *ssl = sbev ? bufferevent_openssl_get_ssl(sbev) : NULL;
    rc->conn = ssl ? SSL_get_ex_data(ssl, ssl_conn_index) : NULL;
    if (rc->conn) {
        rc->conn->cur = rc;
        evhttp_connection_set_closecb(evcon, on_evcon_close, rc->conn);
    }
    evhttp_request_set_on_complete_cb(req, on_complete, rc);
    char *peer = NULL; /* the client's address, for the access log */
    ev_uint16_t port;
    struct evhttp_connection *ec = evhttp_request_get_connection(req);
    if (ec)
        evhttp_connection_get_peer(ec, &peer, &port);
    if (peer)
        snprintf(rc->peer, sizeof rc->peer, "%s", peer);
    const char *target = evhttp_request_get_uri(req);
    if (target)
        target_path(target, rc->path, sizeof rc->path);

    const char *given = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Request-Id");
    if (given && plain_id(given))
        snprintf(rc->id, sizeof rc->id, "%s", given);
    else
        next_request_id(rc->id, sizeof rc->id);

    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path || !*path)
        path = "/";
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const size_t n = strlen(routes[i].path);
        if (routes[i].label ? strncmp(routes[i].path, path, n) || !path[n]
                            : strcmp(routes[i].path, path))
            continue;
        rc->route = routes[i].label ? routes[i].label : routes[i].path;
        if (cors_preflight(rc, routes[i].allow))
            return;
        if (foreign_page(rc, cmd)) {
            gw_reply_error(rc, 403, "This server does not take requests from web pages of "
                           "other origins unless server.cors_origins names them.", NULL,
                           "origin_not_allowed");
            return;
        }
        if (!(routes[i].methods & cmd) && !(routes[i].leaf && strchr(path + n, '/'))) {
            char msg[160];
            evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", routes[i].allow);
            snprintf(msg, sizeof msg, "Method %s is not allowed on %s; allowed: %s", rc->method,
                     rc->route, routes[i].allow);
            gw_reply_error(rc, 405, msg, NULL, "method_not_allowed");
            return;
        }
        routes[i].handle(rc);
        return;
    }
    char msg[300];
    snprintf(msg, sizeof msg, "Unknown route: %s %.200s", rc->method, path);
    gw_reply_error(rc, 404, msg, NULL, "not_found");
}

/* ------------------------------------------------------------------ shutdown */

static void drain_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gw_server *srv = arg;
    long busy = 0;
    struct conn *next;
    for (struct conn *c = srv->conns; c; c = next) {
        next = c->next; /* conn_close() may free c */
        if (c->closing)
            continue;
        /* an idle keep-alive connection; not one whose last reply, answered, is still
         * going out to a slow reader (megabytes of a stream: it is given the grace) */
        if (c->started == c->completed && c->head_len == 0 && c->frame == F_HEAD &&
            !conn_sending(c))
            conn_close(c);
        else
            busy++;
    }
    if (srv->nconns == 0) {
        gw_log(GW_LOG_INFO, "connections drained: stopping the workers, saving the store");
        event_base_loopexit(srv->base, NULL);
        return;
    }
    if (!srv->cut && since_ms(&srv->t_drain) >= (double)srv->cfg->shutdown_grace_ms) {
        /* the replies still running end with an error their clients read (a 503, or an
         * error event and the stream's end), not a connection cut mid-reply */
        srv->cut = 1;
        clock_gettime(CLOCK_MONOTONIC, &srv->t_cut);
        for (struct conn *c = srv->conns; c; c = next) {
            next = c->next;
            struct gw_req *rc = c->cur;
            if (!c->closing && rc && rc->deferred && !rc->replied && rc->on_cut) {
                void (*cut)(void *) = rc->on_cut;
                rc->on_cut = NULL;
                cut(rc->cut_arg);
                srv->told++;
            }
        }
        if (srv->told)
            gw_log(GW_LOG_WARN, "shutdown grace period over; ending %ld busy request(s) with "
                   "an error", srv->told);
    }
    if (srv->cut && (!srv->told || since_ms(&srv->t_cut) >= CUT_GRACE_MS)) {
        gw_log(GW_LOG_WARN, "shutdown grace period over; closing %ld busy connection(s)", busy);
        event_base_loopexit(srv->base, NULL);
        return;
    }
    struct timeval tv = ms_tv(DRAIN_TICK_MS);
    evtimer_add(srv->drain_timer, &tv);
}

/* A SIGHUP that came while the server was starting (the models load for minutes after the
 * certificate was read): replayed once it listens. A SIGTERM or SIGINT then: the server
 * stops as soon as it can, and exits 0 like any graceful stop; a second one kills it at
 * once (the default action again). */
static volatile sig_atomic_t early_hup, early_stop, started;

static void on_early_signal(int sig)
{
    if (started) { /* the server's own handlers came and went: tearing down, exit at once */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    if (sig == SIGHUP) {
        early_hup = 1;
        return;
    }
    early_stop = sig;
    signal(sig, SIG_DFL);
}

void gw_server_catch_early_signals(void)
{
    signal(SIGHUP, on_early_signal);
    signal(SIGTERM, on_early_signal);
    signal(SIGINT, on_early_signal);
}

/* SIGHUP: the TLS certificate and key are read again (a renewed certificate is served
 * without a restart) and serve new connections; those open keep theirs. On a failure the
 * ones before stay. */
static void on_reload(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    gw_server *srv = arg;
    const struct gw_config *cfg = srv->cfg;
    char err[4400], subject[256], until[32] = "unknown";
    SSL_CTX *ctx = tls_server_ctx_create(cfg->cert_file, cfg->key_file, cfg->data_dir, NULL, 0,
                                         err, sizeof err);
    if (!ctx) {
        gw_metric_add(srv->m_tls_reloads, 1, "failed");
        gw_log_kv(GW_LOG_ERROR, "SIGHUP: the TLS certificate was not reloaded; the one "
                  "loaded before is still served", "error", err, NULL);
        return;
    }
    SSL_CTX_free(srv->ssl); /* each connection holds a reference to its own */
    srv->ssl = ctx;
    int64_t t = tls_ctx_certificate(ctx, subject, sizeof subject);
    time_t tt = (time_t)t;
    struct tm tm;
    if (t >= 0 && gmtime_r(&tt, &tm))
        strftime(until, sizeof until, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (t >= 0) /* a certificate without notAfter: no expiry to alert on */
        gw_metric_set(srv->m_cert_expiry, (double)t);
    gw_metric_add(srv->m_tls_reloads, 1, "ok");
    gw_log_kv(GW_LOG_INFO | GW_LOG_ALWAYS, "SIGHUP: TLS certificate reloaded", "subject",
              subject, "not_after", until, NULL);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    gw_server *srv = arg;
    if (srv->draining) {
        gw_log(GW_LOG_WARN, "second signal: exiting now");
        srv->exit_code = 1;
        event_base_loopexit(srv->base, NULL);
        return;
    }
    gw_log(GW_LOG_INFO, "%s received: draining %ld connection(s), grace %lld ms",
           sig == SIGINT ? "SIGINT" : "SIGTERM", srv->nconns,
           (long long)srv->cfg->shutdown_grace_ms);
    srv->draining = 1;
    clock_gettime(CLOCK_MONOTONIC, &srv->t_drain);
    evhttp_del_accept_socket(srv->http, srv->bound); /* closes the listening socket */
    srv->bound = NULL;
    srv->listener = NULL;
    drain_check(-1, 0, srv);
}

/* ------------------------------------------------------------------ lifecycle */

static int register_metrics(gw_server *srv)
{
    static const double latency_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                            0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                            5,      10,    30,     60,    120};
    gw_metrics *m = srv->metrics;
    srv->m_requests = gw_metrics_counter(m, "cachegate_http_requests_total",
                                         "HTTP requests answered, by route and status.",
                                         "route,status");
    srv->m_latency = gw_metrics_histogram(
        m, "cachegate_http_request_duration_seconds",
        "Time from a complete request to its response being written, by route and status.",
        "route,status", latency_bounds, (int)(sizeof latency_bounds / sizeof latency_bounds[0]));
    srv->m_conns = gw_metrics_gauge(m, "cachegate_http_open_connections",
                                    "Client connections currently open.", NULL);
    srv->m_paused = gw_metrics_counter(m, "cachegate_http_accept_paused_total",
                                       "Times accepting paused at server.max_connections.", NULL);
    srv->m_accept_failed = gw_metrics_counter(
        m, "cachegate_http_accept_failures_total",
        "Connections accept() failed to take (out of file descriptors: accepting pauses a "
        "moment; the log says more).", NULL);
    srv->m_uptime =
        gw_metrics_gauge(m, "cachegate_uptime_seconds", "Seconds since the server started.", NULL);
    srv->m_start = gw_metrics_gauge(m, "cachegate_start_time_seconds",
                                    "Start time of the server, seconds since the epoch.", NULL);
    srv->m_info = gw_metrics_gauge(m, "cachegate_build_info",
                                   "Always 1; labels describe the running server.",
                                   "version,device");
    srv->m_cert_expiry = gw_metrics_gauge(m, "cachegate_tls_certificate_expiry_timestamp_seconds",
                                          "When the TLS certificate served expires (its "
                                          "notAfter), seconds since the epoch.", NULL);
    srv->m_tls_reloads = gw_metrics_counter(m, "cachegate_tls_reloads_total",
                                            "TLS certificate reloads on SIGHUP, by result "
                                            "(ok, or failed: the one before is still "
                                            "served).", "result");
    srv->m_store_failed = gw_metrics_counter(m, "cachegate_store_write_failures_total",
                                             "Batches of store writes rolled back (a full "
                                             "disk, say): answers, usage figures, stored "
                                             "responses; the log says what each held.", NULL);
    srv->m_db_lost = gw_metrics_gauge(m, "cachegate_store_database_lost",
                                      "1 while the database file the server writes is deleted "
                                      "or replaced under it (checked every 10 s): what it "
                                      "writes is lost at the next start.", NULL);
    if (!srv->m_requests || !srv->m_latency || !srv->m_conns || !srv->m_paused ||
        !srv->m_uptime || !srv->m_start || !srv->m_info || !srv->m_cert_expiry ||
        !srv->m_tls_reloads || !srv->m_store_failed || !srv->m_db_lost)
        return -1;
    gw_metric_add(srv->m_tls_reloads, 0, "ok");
    gw_metric_add(srv->m_tls_reloads, 0, "failed");
    int64_t expiry = tls_ctx_certificate(srv->ssl, NULL, 0);
    if (expiry >= 0)
        gw_metric_set(srv->m_cert_expiry, (double)expiry);
    gw_metric_set(srv->m_start, (double)srv->wall_start);
    gw_metric_set(srv->m_info, 1, GW_VERSION, srv->dev->use_cuda ? "cuda" : "cpu");
    return 0;
}

/* Without authentication, only this machine may connect. */
/* The address to listen on, checked against the configuration: 0, or -1 with err. */
static int listen_address(const gw_server *srv, struct evutil_addrinfo **ai, char *err,
                          size_t errlen)
{
    char host[256], port_s[16];
    int port;
    if (gw_config_split_listen(srv->cfg->listen, host, sizeof host, &port)) {
        snprintf(err, errlen, "bad listen address '%s'", srv->cfg->listen);
        return -1;
    }
    if (gw_config_check_serve(srv->cfg, err, errlen))
        return -1;
    snprintf(port_s, sizeof port_s, "%d", port);
    struct evutil_addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = EVUTIL_AI_PASSIVE;
    *ai = NULL;
    int gai = evutil_getaddrinfo(host, port_s, &hints, ai);
    if (gai != 0 || !*ai) {
        snprintf(err, errlen, "cannot resolve listen address %s: %s", srv->cfg->listen,
                 evutil_gai_strerror(gai));
        return -1;
    }
    /* the address bound, not only the one the configuration check resolved earlier */
    if (gw_config_check_address(srv->cfg, (*ai)->ai_addr, err, errlen)) {
        evutil_freeaddrinfo(*ai);
        return -1;
    }
    return 0;
}

/* Before the models load (for minutes, with a large one): a port in use or a data directory
 * another server holds fails the start now, with the message it would give after them. */
static int can_start(const gw_server *srv, char *err, size_t errlen)
{
    if (store_in_use(srv->cfg->data_dir, err, errlen))
        return -1;
    struct evutil_addrinfo *ai;
    if (listen_address(srv, &ai, err, errlen))
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, rc = 0;
    if (fd >= 0) { /* bound as the listener will be (SO_REUSEADDR), then let go */
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, (socklen_t)ai->ai_addrlen)) {
            snprintf(err, errlen, "cannot listen on %s: %s", srv->cfg->listen, strerror(errno));
            rc = -1;
        }
        close(fd);
    }
    evutil_freeaddrinfo(ai);
    return rc;
}

static int bind_listener(gw_server *srv, char *err, size_t errlen)
{
    struct evutil_addrinfo *ai;
    if (listen_address(srv, &ai, err, errlen))
        return -1;
    char host[256];
    int port;
    gw_config_split_listen(srv->cfg->listen, host, sizeof host, &port);
    srv->listener = evconnlistener_new_bind(
        srv->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
        1024, ai->ai_addr, (int)ai->ai_addrlen);
    evutil_freeaddrinfo(ai);
    if (!srv->listener) {
        snprintf(err, errlen, "cannot listen on %s: %s", srv->cfg->listen, strerror(errno));
        return -1;
    }
    srv->bound = evhttp_bind_listener(srv->http, srv->listener);
    if (!srv->bound) {
        evconnlistener_free(srv->listener);
        srv->listener = NULL;
        snprintf(err, errlen, "out of memory binding the listener");
        return -1;
    }
    accepting_srv = srv;
    evconnlistener_set_error_cb(srv->listener, on_accept_error);
    /* accepted sockets inherit TCP_NODELAY from the listening socket (Linux) */
    evutil_socket_t fd = evconnlistener_get_fd(srv->listener);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char addr[INET6_ADDRSTRLEN] = "?", where[300];
    int bound = port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof addr);
            bound = ntohs(s6->sin6_port);
            snprintf(where, sizeof where, "[%s]:%d", addr, bound);
        } else {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof addr);
            bound = ntohs(s4->sin_port);
            snprintf(where, sizeof where, "%s:%d", addr, bound);
        }
    }
    char port_str[16];
    snprintf(port_str, sizeof port_str, "%d", bound);
    gw_log_kv(GW_LOG_INFO | GW_LOG_ALWAYS, "listening", "address", where, GW_LOG_BARE("port"),
              port_str, "device", srv->dev->description, NULL);
    return 0;
}

/* The chat model, its tokenizer and template, and the engine thread. */
static int load_llm(gw_server *srv, char *err, size_t errlen)
{
    const struct gw_config *cfg = srv->cfg;
    char msg[1024];
    struct eng_options eo = {.threads = (int)cfg->engine_threads,
                             .int8 = cfg->engine_cpu_matmul == GW_MATMUL_INT8,
                             .backend = srv->dev->cuda ? srv->dev->cuda->eng_create : NULL};
    struct gw_llm *l = &srv->llm;
    if (eng_model_load(cfg->engine_model, &eo, &l->m, msg, sizeof msg) ||
        tok_create(eng_model_gguf(l->m), &l->v, msg, sizeof msg)) {
        snprintf(err, errlen, "loading the chat model: %s", msg);
        return -1;
    }
    struct gguf_str t = {0};
    int have = gguf_get_str(eng_model_gguf(l->m), "tokenizer.chat_template", &t) == 0;
    if (cfg->engine_chat_format) {
        l->fmt = (enum eng_chat_format)(cfg->engine_chat_format - 1);
    } else if (!have || eng_chat_detect(t.p, t.len, &l->fmt)) {
        snprintf(err, errlen, "%s: the chat template is %s; set engine.chat_format",
                 cfg->engine_model, have ? "of an unknown format" : "missing");
        return -1;
    }
    l->default_system = have ? eng_chat_default_system(t.p, t.len) : NULL;
    const struct eng_hparams *hp = eng_model_hparams(l->m);
    int bs = (int)cfg->engine_block_size;
    enum kvc_dtype dtype;
    if (gw_device_kv_dtype((int)cfg->engine_kv_cache_dtype, eng_model_kv_on_device(l->m),
                           eng_model_device(l->m), &dtype, err, errlen))
        return -1;
    struct kvc_shape host = {hp->n_layer, hp->n_head_kv, hp->head_dim, bs, 0, 0, dtype};
    long per_block = (long)kvc_block_bytes(&host);
    int n_blocks = cfg->engine_num_blocks_override
                       ? (int)cfg->engine_num_blocks_override
                       : (int)(cfg->engine_cpu_kv_cache_bytes / per_block);
    if (!eng_model_kv_on_device(l->m))
        gw_log(GW_LOG_INFO, "KV pool: %d blocks of %d positions, %s, %ld bytes each", n_blocks,
               bs, kvc_dtype_name(dtype), per_block);
    if (eng_model_kv_on_device(l->m) && !cfg->engine_num_blocks_override) {
        struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, bs, 0, 1, KVC_F16};
        if (eng_model_kv_capacity(l->m, &ks, cfg->engine_gpu_memory_utilization, &n_blocks)) {
            snprintf(err, errlen, "cannot size the KV pool on %s", eng_model_device(l->m));
            return -1;
        }
        if (n_blocks < 1) {
            snprintf(err, errlen, "no KV block fits in engine.gpu_memory_utilization = %g of "
                     "the free memory of %s", cfg->engine_gpu_memory_utilization,
                     eng_model_device(l->m));
            return -1;
        }
        gw_log(GW_LOG_INFO, "KV pool: %d blocks of %d positions on %s", n_blocks, bs,
               eng_model_device(l->m));
    }
    if (n_blocks < 1) {
        snprintf(err, errlen, "engine.cpu_kv_cache_bytes holds no KV block (%ld bytes each)",
                 per_block);
        return -1;
    }
    struct sched_config sc = {(int)cfg->engine_max_num_seqs, (int)cfg->engine_max_num_batched_tokens,
                              n_blocks, bs, (int)cfg->engine_max_model_len,
                              cfg->engine_prefix_caching, dtype};
    if (sc.max_num_batched_tokens < sc.max_num_seqs)
        sc.max_num_batched_tokens = sc.max_num_seqs;
    l->max_model_len = sched_max_model_len(l->m, sc.max_model_len);
    if (sc.max_model_len > l->max_model_len) {
        char asked[24], got[24];
        snprintf(asked, sizeof asked, "%d", sc.max_model_len);
        snprintf(got, sizeof got, "%d", l->max_model_len);
        gw_log_kv(GW_LOG_WARN, "engine.max_model_len is over the model's context; using the "
                  "context", GW_LOG_BARE("asked"), asked, GW_LOG_BARE("context"), got, NULL);
    }
    l->kv_positions = n_blocks * bs;
    l->w = gw_engw_create(l->m, l->v, &sc, (int)cfg->engine_max_waiting, srv->cq, srv->metrics,
                          msg, sizeof msg);
    if (!l->w) {
        snprintf(err, errlen, "starting the engine: %s", msg);
        return -1;
    }
    static const double lat[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
    static const double tok[] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64};
    l->ttft = gw_metrics_histogram(srv->metrics, "cachegate_engine_time_to_first_token_seconds",
                                   "From a request's arrival to its first generated text.", NULL,
                                   lat, 13);
    l->tpot = gw_metrics_histogram(srv->metrics, "cachegate_engine_time_per_output_token_seconds",
                                   "Mean time between generated tokens after the first, per "
                                   "request.", NULL, tok, 10);
    l->e2e = gw_metrics_histogram(srv->metrics, "cachegate_engine_request_duration_seconds",
                                  "From a request's arrival to its last token.", NULL, lat, 13);
    gw_metric *weights = gw_metrics_gauge(
        srv->metrics, "cachegate_engine_weights_bytes",
        "The chat model's weights: in the process's own memory (host: copies, quantized and "
        "regrouped forms), and the model file mapped and read in place (mapped).",
        "memory");
    if (!l->ttft || !l->tpot || !l->e2e || !weights) {
        snprintf(err, errlen, "out of memory registering metrics");
        return -1;
    }
    gw_metric_set(weights, (double)eng_model_host_bytes(l->m), "host");
    gw_metric_set(weights, (double)gguf_mapped_bytes(eng_model_gguf(l->m)), "mapped");
    char nb[16], shape[2048];
    snprintf(nb, sizeof nb, "%d", n_blocks);
    struct stat mst;
    if (stat(cfg->engine_model, &mst))
        memset(&mst, 0, sizeof mst);
    int shaped = snprintf(shape, sizeof shape, "%s|%s|%lld|%lld|%s|%s|%s|%s|%s", GW_VERSION,
                          cfg->engine_model_name, (long long)mst.st_size,
                          (long long)mst.st_mtime, eng_model_int8(l->m) ? "int8" : "f32",
                          kvc_dtype_name(dtype), eng_model_cpu_isa(),
                          srv->dev->cuda ? "cuda" : "cpu", eng_chat_format_name(l->fmt));
    size_t shaped_len = shaped < 0 ? 0 : (size_t)shaped < sizeof shape ? (size_t)shaped
                                                                         : sizeof shape - 1;
    snprintf(l->fingerprint, sizeof l->fingerprint, "fp_%010llx",
             (unsigned long long)(XXH3_64bits(shape, shaped_len) & 0xffffffffffULL));
    gw_log_kv(GW_LOG_INFO, "engine ready", "model", cfg->engine_model, "chat_format",
              eng_chat_format_name(l->fmt), GW_LOG_BARE("kv_blocks"), nb, "cpu_matmul",
              eng_model_int8(l->m) ? "int8" : "f32", "cpu_isa", eng_model_cpu_isa(),
              GW_LOG_BARE("token_invariant"),
              eng_model_token_invariant(l->m, dtype) ? "true" : "false", NULL);
    return 0;
}

static void index_progress(void *arg, int64_t tenant, int64_t done, int64_t total,
                           const char *rebuilt)
{
    (void)arg;
    /* a rebuild reports every 1024 entries; log about every 10% */
    if (rebuilt && done != total && total >= 10240 && done % (total / 10 / 1024 * 1024 + 1024))
        return;
    char t[24], d[24], n[24];
    snprintf(t, sizeof t, "%lld", (long long)tenant);
    snprintf(d, sizeof d, "%lld", (long long)done);
    snprintf(n, sizeof n, "%lld", (long long)total);
    gw_log_kv(GW_LOG_INFO, rebuilt ? "rebuilding a cache index from the database"
                                   : "cache index loaded",
              "tenant", t, GW_LOG_BARE("done"), d, GW_LOG_BARE("total"), n,
              rebuilt ? "why" : NULL, rebuilt, NULL);
}

/* A write the store could not make, from its writer thread (or at close). */
static void store_failed(void *arg, const char *what)
{
    gw_server *srv = arg;
    gw_metric_add(srv->m_store_failed, 1);
    pthread_mutex_lock(&srv->store_failed_mu);
    snprintf(srv->store_failed_what, sizeof srv->store_failed_what, "%s", what);
    pthread_mutex_unlock(&srv->store_failed_mu);
    atomic_store(&srv->store_failed_ms, (long long)store_now_ms());
    gw_log_kv(GW_LOG_ERROR, "store write failed", "error", what, NULL);
}

/* The store in data_dir and the answer caches over it. */
static int open_cache(gw_server *srv, char *err, size_t errlen)
{
    const struct gw_config *cfg = srv->cfg;
    struct store_options so = {
        .dir = cfg->data_dir,
        .dim = emb_dim(srv->emb),
        .max_entries = cfg->cache_max_entries,
        .max_bytes = cfg->cache_max_bytes,
        .hnsw_min_entries = cfg->cache_hnsw_min_entries,
        .responses_max_bytes = cfg->responses_max_bytes,
        .on_error = store_failed,
        .on_error_arg = srv,
    };
    char msg[1024];
    int rc = store_open(&so, index_progress, NULL, &srv->st, msg, sizeof msg);
    if (rc) {
        snprintf(err, errlen, "opening the store: %s", msg);
        return -1;
    }
    char db[4096];
    struct stat dst;
    snprintf(db, sizeof db, "%s/cachegate.db", cfg->data_dir);
    if (!stat(db, &dst)) {
        srv->db_dev = dst.st_dev;
        srv->db_ino = dst.st_ino;
    }
    srv->cache = gw_cache_create(cfg, srv->st, srv->embw, so.dim, srv->metrics, err, errlen);
    if (!srv->cache)
        return -1;
    srv->tenants = gw_tenants_create(cfg, srv->st, srv->base, srv->metrics, err, errlen);
    return srv->tenants ? 0 : -1;
}

gw_tenants *gw_server_tenants(gw_server *srv)
{
    return srv->tenants;
}

gw_cache *gw_server_cache(gw_server *srv)
{
    return srv->cache;
}

const char *gw_req_id(struct gw_req *rc)
{
    return rc->id;
}

const char *gw_req_header(struct gw_req *rc, const char *name)
{
    return evhttp_find_header(evhttp_request_get_input_headers(rc->req), name);
}

const char *gw_req_header_at(struct gw_req *rc, const char *name, int i)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(rc->req);
    for (struct evkeyval *h = in->tqh_first; h; h = h->next.tqe_next)
        if (!strcasecmp(h->key, name) && i-- == 0)
            return h->value;
    return NULL;
}

void gw_reply_header(struct gw_req *rc, const char *name, const char *value)
{
    /* what the caches did, for the access log: X-Cache MISS, or the X-Cache-Kind of a HIT */
    if (!strcmp(name, "X-Cache") && !strcmp(value, "MISS"))
        snprintf(rc->cache, sizeof rc->cache, "miss");
    else if (!strcmp(name, "X-Cache-Kind"))
        snprintf(rc->cache, sizeof rc->cache, "%s", value);
    evhttp_add_header(evhttp_request_get_output_headers(rc->req), name, value);
}

void gw_reply_header_set(struct gw_req *rc, const char *name, const char *value)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(rc->req);
    evhttp_remove_header(h, name);
    evhttp_add_header(h, name, value);
}

const char *gw_req_method(struct gw_req *rc)
{
    return rc->method;
}

const char *gw_req_path(struct gw_req *rc)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(rc->req);
    const char *p = uri ? evhttp_uri_get_path(uri) : NULL;
    return p ? p : "";
}

const char *gw_req_query(struct gw_req *rc)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(rc->req);
    return uri ? evhttp_uri_get_query(uri) : NULL;
}

/* The event loop's access lines are held and written together, within LOG_FLUSH_US. */
#define LOG_FLUSH_US 5000

static void on_log_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    gw_log_flush();
}

static void on_log_held(void *arg)
{
    gw_server *srv = arg;
    if (!evtimer_pending(srv->log_flush, NULL))
    {
        struct timeval tv = {0, LOG_FLUSH_US};
        evtimer_add(srv->log_flush, &tv);
    }
}

gw_server *gw_server_create(const struct gw_config *cfg, const struct gw_device *dev, char *err,
                            size_t errlen)
{
    gw_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    srv->cfg = cfg;
    srv->dev = dev;
    pthread_mutex_init(&srv->store_failed_mu, NULL);
    clock_gettime(CLOCK_MONOTONIC, &srv->t_start);
    srv->wall_start = time(NULL);
    if (ssl_conn_index < 0)
        ssl_conn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);

    char generated[4200];
    srv->ssl = tls_server_ctx_create(cfg->cert_file, cfg->key_file, cfg->data_dir, generated,
                                     sizeof generated, err, errlen);
    if (!srv->ssl)
        goto fail;
    if (generated[0])
        gw_log_kv(GW_LOG_INFO | GW_LOG_ALWAYS, "generated a self-signed TLS certificate", "path", generated,
                  NULL);
    if (can_start(srv, err, errlen))
        goto fail;

    /* the changelist folds the event changes of one loop iteration into one epoll_ctl per
     * socket (evhttp turns reading off and writing on, then back, for every request); its
     * one hazard, dup()ed descriptors, does not arise here */
    struct event_config *ecfg = event_config_new();
    if (ecfg) {
        event_config_set_flag(ecfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
        srv->base = event_base_new_with_config(ecfg);
        event_config_free(ecfg);
    }
    srv->metrics = gw_metrics_create();
    if (srv->base)
        srv->log_flush = evtimer_new(srv->base, on_log_flush, srv);
    if (!srv->base || !srv->log_flush || !srv->metrics || register_metrics(srv)) {
        snprintf(err, errlen, "out of memory creating the event loop");
        goto fail;
    }
    srv->cq = gw_cq_create(srv->base);
    if (!srv->cq) {
        snprintf(err, errlen, "out of memory creating the completion queue");
        goto fail;
    }
    struct emb_options eo = {.threads = (int)cfg->embedder_threads,
                             .gpu = dev->cuda ? dev->cuda->emb_create : NULL};
    char emsg[1024];
    int erc = emb_model_load(cfg->embedder_model, &eo, &srv->emb, emsg, sizeof emsg);
    if (erc) {
        snprintf(err, errlen, "loading the embedding model: %s", emsg);
        goto fail;
    }
    load_guard_words(cfg);
    srv->embw = gw_embedw_create(srv->emb, srv->cq, (int)cfg->embedder_max_batch,
                                 cfg->embedder_max_wait_us, srv->metrics);
    if (!srv->embw) {
        snprintf(err, errlen, "cannot start the embedder worker");
        goto fail;
    }
    /* optional: a configuration from before it, beside models without it, still starts */
    if (cfg->embedder_openai_tokenizer[0] &&
        gw_otok_load(cfg->embedder_openai_tokenizer, &srv->otok, emsg, sizeof emsg))
        gw_log_kv(GW_LOG_WARN, "embedder.openai_tokenizer not loaded: token-id inputs to "
                  "/v1/embeddings are refused", "error", emsg, NULL);
    if (open_cache(srv, err, errlen) || load_llm(srv, err, errlen))
        goto fail;
    srv->http = evhttp_new(srv->base);
    srv->sig_int = evsignal_new(srv->base, SIGINT, on_signal, srv);
    srv->sig_term = evsignal_new(srv->base, SIGTERM, on_signal, srv);
    srv->sig_hup = evsignal_new(srv->base, SIGHUP, on_reload, srv);
    srv->drain_timer = evtimer_new(srv->base, drain_check, srv);
    srv->accept_retry = evtimer_new(srv->base, on_accept_retry, srv);
    srv->reclaim_check = event_new(srv->base, -1, EV_PERSIST, on_reclaim_check, srv);
    srv->db_check = event_new(srv->base, -1, EV_PERSIST, on_db_check, srv);
    if (!srv->cq || !srv->http || !srv->sig_int || !srv->sig_term || !srv->sig_hup ||
        !srv->drain_timer || !srv->accept_retry || !srv->reclaim_check || !srv->db_check) {
        snprintf(err, errlen, "out of memory creating the HTTP server");
        goto fail;
    }
    evhttp_set_bevcb(srv->http, on_bev, srv);
    evhttp_set_gencb(srv->http, on_request, srv);
    evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                              EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                              EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    /* the framing filter enforces both first, with OpenAI error bodies */
    evhttp_set_max_headers_size(srv->http, (ev_ssize_t)cfg->max_header_bytes);
    evhttp_set_max_body_size(srv->http, (ev_ssize_t)cfg->max_body_bytes);
    struct timeval idle = ms_tv(cfg->idle_timeout_ms);
    evhttp_set_timeout_tv(srv->http, &idle);
    /* signals first: a client may act on the "listening" line at once */
    evsignal_add(srv->sig_int, NULL);
    evsignal_add(srv->sig_term, NULL);
    evsignal_add(srv->sig_hup, NULL);
    started = 1;
    if (early_hup) { /* asked for while starting: the certificate may be newer than the one read */
        early_hup = 0;
        event_active(srv->sig_hup, EV_SIGNAL, 1);
    }
    fit_open_files(cfg);
    if (bind_listener(srv, err, errlen))
        goto fail;
    if (early_stop) { /* it drains nothing and exits 0 */
        gw_log(GW_LOG_INFO, "%s came while starting: stopping",
               early_stop == SIGINT ? "SIGINT" : "SIGTERM");
        event_active(early_stop == SIGINT ? srv->sig_int : srv->sig_term, EV_SIGNAL, 1);
        early_stop = 0;
    }
    return srv;
fail:
    gw_server_destroy(srv);
    return NULL;
}

int gw_server_run(gw_server *srv)
{
    struct timeval every = {DB_CHECK_S, 0};
    event_add(srv->db_check, &every);
    gw_log_hold(on_log_held, srv);
    event_base_dispatch(srv->base);
    gw_log_release();
    return srv->exit_code;
}

void gw_server_destroy(gw_server *srv)
{
    if (!srv)
        return;
    /* requests still running (the grace period ran out, or a second signal came) lose their
     * client now: marked gone before evhttp frees their evhttp_request, so that the work
     * the threads below still post finds them gone and does not reply. (Their conn_free()
     * may never run: the loop that would finalize the filters has stopped.) */
    for (struct conn *c = srv->conns; c; c = c->next)
        if (c->cur)
            req_finish(c->cur, 1);
    if (srv->http)
        evhttp_free(srv->http); /* frees every connection, and so every conn */
    gw_embedw_destroy(srv->embw); /* posts what it still held */
    gw_engw_destroy(srv->llm.w);
    if (srv->st) /* the store's work that reports to the loop (a listing, a deletion) */
        store_sync(srv->st);
    gw_cq_destroy(srv->cq);       /* runs those completions; their clients are gone */
    if (srv->st) /* the writes they queued report to the cache: done while it lives */
        store_sync(srv->st);
    gw_cache_destroy(srv->cache);
    gw_tenants_destroy(srv->tenants);
    store_close(srv->st);         /* commits the answers still queued, saves the indexes */
    emb_model_destroy(srv->emb);
    gw_otok_destroy(srv->otok);
    tok_destroy(srv->llm.v);
    eng_model_destroy(srv->llm.m);
    free(srv->llm.default_system);
    if (srv->log_flush)
        event_free(srv->log_flush);
    if (srv->db_check)
        event_free(srv->db_check);
    if (srv->sig_int)
        event_free(srv->sig_int);
    if (srv->sig_term)
        event_free(srv->sig_term);
    if (srv->sig_hup)
        event_free(srv->sig_hup);
    if (srv->drain_timer)
        event_free(srv->drain_timer);
    if (srv->accept_retry)
        event_free(srv->accept_retry);
    if (srv->reclaim_check)
        event_free(srv->reclaim_check);
    if (srv->base)
        event_base_free(srv->base);
    gw_metrics_destroy(srv->metrics);
    SSL_CTX_free(srv->ssl);
    pthread_mutex_destroy(&srv->store_failed_mu);
    free(srv);
}
