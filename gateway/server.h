/*
 * server — the HTTPS front end: libevent evhttp over OpenSSL bufferevents.
 *
 * Each accepted connection is a stack of three bufferevents:
 *
 *     evhttp  <->  framing filter (this module)  <->  OpenSSL bufferevent  <->  socket
 *
 * The framing filter sees every request byte before evhttp does. It holds a request's
 * head back until it is complete, so that it can enforce the header and body timeouts,
 * check the head against HTTP/1.1's grammar and answer what it refuses (400, 413, 414,
 * 417, 431, 501, 505) itself with the OpenAI error body, and count the requests in flight
 * on each connection for a graceful shutdown. It frames bodies exactly as evhttp does
 * (POST, PUT and PATCH have one; a body on any other method is refused), by Content-Length
 * or by following a chunked body's framing (whose size lines it passes on without chunk
 * extensions, which evhttp refuses), and passes
 * one request at a time: the next one's head waits, unread, until the reply before it
 * has been sent, so replies, refusals included, leave in order, a "Connection: close"
 * ends the connection after its own reply, and a pipelined head's timeout starts only
 * when its turn comes. evhttp parses what passes.
 *
 * Shutdown (SIGINT/SIGTERM, or gw_server_stop): the listening socket is closed, idle
 * connections are closed, responses get "Connection: close", and the loop exits when
 * no connection is left or the grace period has passed.
 *
 * Everything here runs on the event-loop thread; workers reach it through completion.h.
 */
#ifndef GW_SERVER_H
#define GW_SERVER_H

#include "config.h"
#include "device.h"

#define GW_VERSION "0.1.0"

typedef struct gw_server gw_server;

/*
 * Binds the listener and prepares TLS. cfg and dev are borrowed for the server's life.
 * Returns NULL with a message in err.
 */
gw_server *gw_server_create(const struct gw_config *cfg, const struct gw_device *dev, char *err,
                            size_t errlen);

/* Runs until shutdown has completed (in-flight requests finished, or the grace period
 * over: both exit 0). Returns 1 only when a second signal cut the drain short. */
int gw_server_run(gw_server *srv);

void gw_server_destroy(gw_server *srv); /* accepts NULL */

/* Before gw_server_create(): a SIGHUP from now on (while the models load) is remembered, and
 * the server reloads its TLS certificate for it once it listens; a SIGTERM or SIGINT is a
 * graceful stop as soon as it listens (exit 0), a second one the signal's default action. */
void gw_server_catch_early_signals(void);

#endif
