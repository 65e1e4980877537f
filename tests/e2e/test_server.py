"""End-to-end tests of the gateway core: TLS, routes, limits, metrics, shutdown."""

import json
import re
import signal
import socket
import ssl
import subprocess
import threading
import time

import httpx
import openai
import pytest

from conftest import BIN, DEVICE, PROMTOOL, ROOT, Server, read_http_response


def client(server, **kw):
    return httpx.Client(base_url=server.base_url, verify=server.ssl_context(), timeout=10, **kw)


def assert_openai_error(resp, status, code):
    assert resp.status_code == status
    assert resp.headers["content-type"] == "application/json"
    body = resp.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["code"] == code
    assert err["type"] == "invalid_request_error"
    assert err["param"] is None
    assert err["message"]
    return err


def test_health(server):
    with client(server) as c:
        r = c.get("/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok"
    assert body["version"]
    # "cpu", or the GPU by name ("cuda:0 NVIDIA H100 ...")
    assert body["device"] == "cpu" if DEVICE == "cpu" else body["device"].startswith("cuda:0 ")
    assert body["uptime_s"] >= 0
    assert r.headers["x-request-id"]
    # the access log has one line for it
    line = server.wait_log(lambda l: l.get("msg") == "request" and l.get("route") == "/health")
    assert line["status"] == 200 and line["method"] == "GET"
    assert line["request_id"] == r.headers["x-request-id"]
    assert line["latency_ms"] >= 0
    assert line["peer"] == "127.0.0.1"  # who asked
    assert "cache" not in line  # no cache looked at it


def test_a_failure_of_the_servers_is_logged_at_warn(make_server):
    """At log.level = warn the access log was silent, 5xx included: a timeout or a failed
    engine left no trace. A 5xx line is a warning now; a clean stop ends with "shutdown
    complete", written once the store is saved."""
    server = make_server("[log]\nlevel = warn\n")
    with client(server) as c:
        assert c.get("/health").status_code == 200
        r = c.post("/v1/chat/completions", headers={"Cache-Control": "only-if-cached"},
                   json={"model": "smollm2-135m-instruct",
                         "messages": [{"role": "user", "content": "Never asked before?"}]})
        assert r.status_code == 504
    line = server.wait_log(lambda l: l.get("msg") == "request" and l.get("status") == 504)
    assert line and line["level"] == "warn"
    assert not [l for l in server.lines if l.get("msg") == "request" and l.get("status") == 200]
    assert server.stop() == 0
    assert not [l for l in server.lines if l.get("msg") == "shutdown complete"], "an info line"


def test_health_says_degraded_when_the_database_goes(make_server):
    """A database deleted under a running server went unnoticed: /health said ok, answers
    were "written" into the deleted file, and all of it was gone at the next start."""
    server = make_server()
    with client(server) as c:
        assert c.get("/health").json()["status"] == "ok"
        (server.data_dir / "cachegate.db").unlink()
        r = c.get("/health")
        assert r.status_code == 200 and r.json()["status"] == "degraded", r.text
        assert "deleted or replaced" in r.json()["problems"][0]
        # said in the log at error, once, and in /metrics, for the alerts (within 10 s of it
        # without a look at /health)
        assert "cachegate_store_database_lost 1" in c.get("/metrics").text
    line = server.wait_log(lambda l: "deleted or replaced" in l.get("msg", ""), timeout=2)
    assert line and line["level"] == "error" and line["path"].endswith("cachegate.db"), line
    assert len([l for l in server.lines if "deleted or replaced" in l.get("msg", "")]) == 1


def test_request_id_is_kept_when_given(server):
    with client(server) as c:
        r = c.get("/health", headers={"X-Request-Id": "abc-123"})
        assert r.headers["x-request-id"] == "abc-123"
        r = c.get("/health", headers={"X-Request-Id": "bad id with spaces"})
        assert r.headers["x-request-id"] != "bad id with spaces"


def test_request_ids_say_nothing_of_other_requests(server):
    # random, not a counter: a tenant's ids do not tell how many requests others sent
    with client(server) as c:
        ids = [c.get("/health").headers["x-request-id"] for _ in range(3)]
    assert len(set(ids)) == 3
    for i in ids:
        assert re.fullmatch(r"req_[0-9a-f]{24}", i), i
    assert len({i[-6:] for i in ids}) == 3 and len({i[4:10] for i in ids}) == 3


def test_keep_alive_reuses_one_connection(server):
    with client(server) as c:
        for _ in range(20):
            assert c.get("/health").status_code == 200
    assert server.wait_log(lambda l: l.get("msg") == "request", timeout=1)
    # HTTP/1.1 keep-alive: a single TLS handshake served all requests; the server saw one
    # connection, visible in the open-connections gauge while the client is open
    with client(server) as c:
        c.get("/health")
        text = c.get("/metrics").text
    assert "cachegate_http_open_connections 1\n" in text


def test_metrics_pass_promtool(server):
    with client(server) as c:
        c.get("/health")
        c.get("/nope")
        r = c.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.text
    assert 'cachegate_http_requests_total{route="/health",status="200"} 1\n' in text
    assert 'cachegate_http_requests_total{route="unmatched",status="404"} 1\n' in text
    assert 'cachegate_http_request_duration_seconds_bucket{route="/health",status="200",le="+Inf"} 1\n' in text
    # the engine's series exist before its first request
    for series in ("cachegate_engine_running_requests 0", "cachegate_engine_waiting_requests 0",
                   "cachegate_engine_preemptions_total 0",
                   "cachegate_engine_generated_tokens_total 0",
                   # and a write's every result, and the store's failures
                   'cachegate_cache_writes_total{result="error"} 0',
                   "cachegate_store_write_failures_total 0"):
        assert series + "\n" in text, series
    check = subprocess.run([str(PROMTOOL), "check", "metrics"], input=text, text=True,
                           capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_models_list(server):
    with client(server) as c:
        r = c.get("/v1/models")
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "list"
    ids = [m["id"] for m in body["data"]]
    assert ids == ["smollm2-135m-instruct", "all-minilm-l6-v2"]
    for m in body["data"]:
        assert m["object"] == "model" and m["owned_by"] == "cachegate"
        assert isinstance(m["created"], int)


def test_openai_sdk_lists_models(server):
    http = httpx.Client(verify=server.ssl_context())
    sdk = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", http_client=http)
    models = sdk.models.list()
    assert [m.id for m in models.data] == ["smollm2-135m-instruct", "all-minilm-l6-v2"]
    for m in models.data:  # GET /v1/models/{model}
        one = sdk.models.retrieve(m.id)
        assert one.id == m.id and one.object == "model" and one.created == m.created
    with pytest.raises(openai.NotFoundError) as e:
        sdk.models.retrieve("gpt-4o")
    assert e.value.body["code"] == "model_not_found" and e.value.body["param"] == "model"
    http.close()
    with client(server) as c:
        assert c.get("/v1/models/").status_code == 404  # no name: no such route
        r = c.delete("/v1/models/smollm2-135m-instruct")
        assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
        metrics = c.get("/metrics").text
    assert 'route="/v1/models/{model}"' in metrics


def test_error_messages_quoting_cut_or_undecodable_text(server):
    """An error that quotes the request (a model's name cut to 200 bytes, inside a
    character; a path that decodes to bytes of no text) keeps its message: those bytes as
    U+FFFD, never the message dropped from the body (the SDK then had only the status)."""
    http = httpx.Client(verify=server.ssl_context())
    sdk = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", http_client=http)
    with pytest.raises(openai.NotFoundError) as e:
        sdk.chat.completions.create(model="\u65e5" * 100, messages=[{"role": "user",
                                                                   "content": "Hi"}])
    body = e.value.body
    assert body["code"] == "model_not_found" and body["param"] == "model"
    assert body["message"].startswith("The model `" + "\u65e5" * 66 + "\ufffd`")
    http.close()
    with client(server) as c:
        r = c.get("/v1/models/%ff%fe")
        err = r.json()["error"]
        assert r.status_code == 404 and err["code"] == "model_not_found"
        assert err["message"] == "The model `\ufffd\ufffd` does not exist."


def test_unknown_route_404(server):
    with client(server) as c:
        r = c.get("/v1/nothing-here")
    err = assert_openai_error(r, 404, "not_found")
    assert "/v1/nothing-here" in err["message"]


def test_wrong_method_405(server):
    with client(server) as c:
        r = c.post("/health", json={})
        err = assert_openai_error(r, 405, "method_not_allowed")
        assert r.headers["allow"] == "GET, HEAD"
        assert "POST" in err["message"]
        r = c.delete("/v1/models")
        assert_openai_error(r, 405, "method_not_allowed")


def test_body_too_large_413(make_server):
    server = make_server("[server]\nmax_body_bytes = 64K\n")
    with client(server) as c:
        r = c.post("/v1/models", content=b"x" * (64 * 1024 + 1))
        err = assert_openai_error(r, 413, "request_too_large")
        assert "65537" in err["message"] and "65536" in err["message"]
        assert r.headers["connection"] == "close"
        assert r.headers["date"].endswith(" GMT")  # refused before evhttp, dated all the same
        # at the limit, the body is read and the request routed as usual
        r = c.post("/v1/models", content=b"x" * (64 * 1024))
        assert r.status_code == 405
        assert c.get("/health").status_code == 200


def test_the_default_body_limit_takes_an_embeddings_batch(server):
    """LangChain sends up to 1,000 texts an embeddings request: 1,000 chunks of its
    splitter's 1,000 characters passed the old 1 MiB limit by a few bytes only."""
    with client(server) as c:
        body = {"model": "none", "input": ["word " * 400] * 1000}  # 2 MB of JSON
        r = c.post("/v1/embeddings", json=body)
        assert r.status_code == 404, r.text  # read and routed: no such model
        r = c.post("/v1/models", content=b"x" * (4 * 1024 * 1024 + 1))
        assert_openai_error(r, 413, "request_too_large")


def test_413_sent_before_the_body_is_read(make_server):
    server = make_server("[server]\nmax_body_bytes = 1K\n")
    s = server.tls_socket()
    s.sendall(b"POST /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
    status, headers, body = read_http_response(s)  # no body byte was sent
    assert status == 413
    assert b"request_too_large" in body
    s.close()


def test_chunked_request_bodies(make_server):
    """Clients that stream their bodies (a generator in httpx or requests, Node streams)
    send them chunked; they were refused with 411."""
    server = make_server("[server]\nmax_body_bytes = 1K\n")
    emb = b'{"model":"all-minilm-l6-v2","input":"hi"}'
    chunked = (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"a;ext=1\r\n" + emb[:10] + b"\r\n%x\r\n" % (len(emb) - 10) + emb[10:] +
               b"\r\n0\r\nX-Request-Id: from-the-trailer\r\n\r\n")
    got = exchange(server, chunked + b"GET /health HTTP/1.1\r\nHost: x\r\n"
                                     b"Connection: close\r\n\r\n")
    assert [g[0] for g in got] == [200, 200], got
    assert len(json.loads(got[0][2])["data"][0]["embedding"]) == 384
    # trailer fields are not headers (RFC 9110 6.5): dropped, not merged
    assert got[0][1]["x-request-id"] != "from-the-trailer"
    # a size line cut between two writes: the filter waits for its end (it spun on it,
    # and the event loop served nobody)
    s = server.tls_socket(timeout=30)
    size = b"%x" % len(emb)
    s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
              b"Connection: close\r\n\r\n" + size[:1])
    time.sleep(0.3)
    with client(server) as c:
        c.timeout = 5
        assert c.get("/health").status_code == 200
    s.sendall(size[1:] + b"\r\n" + emb + b"\r\n0\r\n\r\n")
    got = split_responses(read_to_eof(s))
    s.close()
    assert [g[0] for g in got] == [200], got
    with client(server) as c:
        r = c.post("/v1/embeddings", content=(p for p in (emb[:7], emb[7:])))
        assert r.status_code == 200, r.text
        assert c.get("/health").status_code == 200  # the same connection goes on
        big = (b'{"model":"all-minilm-l6-v2","input":"' + b"x" * 600,
               b"x" * 600 + b'"}')
        r = c.post("/v1/embeddings", content=(p for p in big))
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"


def test_chunked_bodies_cut_anywhere_between_writes(server):
    """Each request, chunked in pieces of random sizes and written in random cuts (each
    write a TLS record of its own), is answered; the server keeps serving between writes."""
    import random
    rnd = random.Random(7)
    emb = b'{"model":"all-minilm-l6-v2","input":"a question about chunked bodies"}'
    for _ in range(12):
        body, left = b"", emb
        while left:
            n = rnd.randint(1, 9)
            ext = b";x=%d" % n if rnd.random() < 0.3 else b""
            body += b"%x%s\r\n%s\r\n" % (n if n <= len(left) else len(left), ext, left[:n])
            left = left[n:]
        body += b"0\r\n" + (b"T: v\r\n" if rnd.random() < 0.5 else b"") + b"\r\n"
        raw = (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n" + body)
        cuts = sorted(rnd.sample(range(1, len(raw)), 4))
        s = server.tls_socket(timeout=30)
        for a, b in zip([0] + cuts, cuts + [len(raw)]):
            s.sendall(raw[a:b])
            time.sleep(0.02)
        got = split_responses(read_to_eof(s))
        s.close()
        assert [g[0] for g in got] == [200], (raw, got)
    with client(server) as c:
        assert c.get("/health").status_code == 200


def test_cors_for_the_browser_origins_configured(make_server):
    """A chat page in a browser calls the API from another origin: its preflight gets what
    the route allows, and its responses may be read. Off by default."""
    cors = make_server("[server]\ncors_origins = https://chat.example, https://b.example\n")
    page = {"Origin": "https://chat.example"}
    with client(cors) as c:
        r = c.options("/v1/chat/completions", headers={
            **page, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os"})
        assert r.status_code == 204, r.text
        assert r.headers["access-control-allow-origin"] == "https://chat.example"
        assert "POST" in r.headers["access-control-allow-methods"]
        assert r.headers["access-control-allow-headers"] == \
            "authorization, content-type, x-stainless-os"
        r = c.post("/v1/embeddings", headers=page,
                   json={"model": "all-minilm-l6-v2", "input": "hi"})
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://chat.example"
        assert "X-Cache" in r.headers["access-control-expose-headers"]
        assert r.headers["vary"] == "Origin"
        other = {"Origin": "https://evil.example"}
        r = c.get("/health", headers=other)
        assert "access-control-allow-origin" not in r.headers
        # a response that depends on Origin says so also where it allows none, so that a
        # shared cache gives neither page the other's
        assert r.headers["vary"] == "Origin"
        assert c.get("/health").headers["vary"] == "Origin"
        r = c.options("/v1/chat/completions",
                      headers={**other, "Access-Control-Request-Method": "POST"})
        assert r.status_code == 405 and "access-control-allow-origin" not in r.headers
        # a page of another origin may POST a "simple" request without asking first: it
        # could not read the answer, but it would spend the server's compute
        r = c.post("/v1/embeddings", headers={**other, "Content-Type": "text/plain"},
                   content=json.dumps({"model": "all-minilm-l6-v2", "input": "hi"}))
        assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"
    cors.stop()
    with client(make_server()) as c:  # the default: no origin is allowed
        r = c.get("/health", headers=page)
        assert "access-control-allow-origin" not in r.headers and "vary" not in r.headers
        r = c.post("/v1/embeddings", headers=page,
                   json={"model": "all-minilm-l6-v2", "input": "hi"})
        assert r.status_code == 403, r.text
        r = c.post("/v1/embeddings", json={"model": "all-minilm-l6-v2", "input": "hi"})
        assert r.status_code == 200  # clients other than browsers send no Origin


def test_head_too_large_431(make_server):
    server = make_server("[server]\nmax_header_bytes = 2K\n")
    with client(server) as c:
        r = c.get("/health?api_key=secret123", headers={"X-Big": "y" * 4096})
        assert r.status_code == 431
        assert r.json()["error"]["code"] == "request_header_too_large"
        # its log line says who, and the path without the query (which may hold a secret)
        line = server.wait_log(lambda l: l.get("msg") == "request" and l.get("status") == 431)
        assert line["route"] == "unmatched" and line["path"] == "/health", line
        assert line["peer"] == "127.0.0.1", line
        assert "secret123" not in json.dumps(server.lines)
        assert c.get("/nope?token=secret456").status_code == 404
        line = server.wait_log(lambda l: l.get("msg") == "request" and l.get("status") == 404)
        assert line["route"] == "unmatched" and line["path"] == "/nope", line
        assert "secret456" not in json.dumps(server.lines)


def test_header_timeout_closes_connection(make_server):
    server = make_server("[server]\nheader_timeout_ms = 300\n")
    s = server.tls_socket()
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # the head never ends
    t0 = time.monotonic()
    got = read_to_eof(s)  # a 408, then closed by the server
    assert time.monotonic() - t0 < 5
    assert got.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), got
    assert json.loads(got.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
    s.close()
    # its latency is the wait (it said 0: slow clients did not show on the dashboards)
    line = server.wait_log(lambda l: l.get("msg") == "request" and l.get("status") == 408)
    assert line and line["latency_ms"] >= 250, line


def test_a_tls_handshake_never_finished_is_closed_at_the_header_timeout(make_server):
    """A client that connects and never finishes its handshake held one of
    max_connections for the idle timeout (60 s by default); 1,024 such sockets shut
    everyone out. A finished handshake waits for its first request as long as before."""
    server = make_server("[server]\nheader_timeout_ms = 300\nidle_timeout_ms = 30000\n")
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    t0 = time.monotonic()
    assert raw.recv(1024) == b""  # closed by the server
    assert time.monotonic() - t0 < 5
    raw.close()
    s = server.tls_socket()
    time.sleep(1.0)  # past the header timeout, idle before its first request
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert s.recv(1024).startswith(b"HTTP/1.1 200")
    s.close()


def test_body_timeout_closes_connection(make_server):
    server = make_server("[server]\nbody_timeout_ms = 300\n")
    s = server.tls_socket()
    s.sendall(b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
    t0 = time.monotonic()
    got = read_to_eof(s)
    assert time.monotonic() - t0 < 5
    assert got.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), got
    assert b"server.body_timeout_ms" in got
    s.close()


def test_connection_close_response_is_complete(server):
    # a response after which the server closes must still arrive whole
    with client(server) as c:
        for _ in range(5):
            r = c.get("/metrics", headers={"Connection": "close"})
            assert r.status_code == 200
            assert r.headers["connection"] == "close"
            assert len(r.content) == int(r.headers["content-length"])
            assert r.text.endswith("\n") and "cachegate_start_time_seconds" in r.text
    # "close" among other tokens closes too, and the response says so (once)
    s = server.tls_socket()
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n")
    raw = read_to_eof(s)
    head = raw.split(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 200") and head.count(b"\r\nconnection: close") == 1, raw
    s.close()
    # and the server ends its TLS data with close_notify, by which a client tells a
    # response read to the close (HTTP/1.0 has no length) from one cut short (ragged EOFs
    # raise here)
    for req in (b"GET /health HTTP/1.0\r\n\r\n",
                b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"):
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s = server.ssl_context().wrap_socket(raw, server_hostname="localhost",
                                             suppress_ragged_eofs=False)
        s.sendall(req)
        got = read_to_eof(s)  # (ssl.SSLEOFError without the close_notify)
        assert b'"status":"ok"' in got, got
        s.close()


def read_to_eof(sock):
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def split_responses(raw, bodiless=()):
    """Pipelined responses read to the end: [(status, headers, body)]; the responses at
    the indexes in `bodiless` (replies to HEAD) carry none."""
    out = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        assert sep, "a response head without its end: %r" % raw
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip()
                   for k, _, v in (line.partition(":") for line in lines[1:])}
        n = 0 if len(out) in bodiless else int(headers.get("content-length", "0"))
        out.append((int(lines[0].split()[1]), headers, rest[:n]))
        raw = rest[n:]
    return out


def exchange(server, raw, bodiless=()):
    s = server.tls_socket(timeout=30)
    s.sendall(raw)
    try:
        return split_responses(read_to_eof(s), bodiless)
    finally:
        s.close()


def test_head_has_no_body_and_keeps_the_connection(server):
    with client(server) as c:
        for path in ("/health", "/metrics", "/v1/models"):
            r = c.head(path)
            assert r.status_code == 200 and r.content == b""
            assert int(r.headers["content-length"]) > 0
            assert c.get("/v1/models").json()["object"] == "list"  # same connection
    # (a body that does not change between the two: /health's uptime may gain a digit)
    got = exchange(server, b"HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
                           b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                   bodiless=(0,))
    assert [g[0] for g in got] == [200, 200]
    assert got[0][1]["content-length"] == got[1][1]["content-length"]
    assert b'"object":"list"' in got[1][2]


def test_pipelined_replies_keep_their_order(server):
    get = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Request-Id: first\r\n\r\n"
    emb = b'{"model":"all-minilm-l6-v2","input":"hi"}'
    cases = [
        (get + b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: second\r\n"
               b"Transfer-Encoding: gzip\r\n\r\n0\r\n\r\n", 501),
        (get + b"GET /health HTTP/7.7\r\nHost: x\r\nX-Request-Id: second\r\n\r\n", 505),
        (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: first\r\n"
         b"Content-Length: %d\r\n\r\n%s" % (len(emb), emb) +
         b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: second\r\n"
         b"Content-Length: 999999999\r\n\r\n", 413),
    ]
    for raw, refused in cases:
        got = exchange(server, raw)
        assert [(g[0], g[1]["x-request-id"]) for g in got] == [(200, "first"),
                                                              (refused, "second")], raw
        assert got[1][1]["connection"] == "close"


@pytest.mark.parametrize("raw,status,code", [
    (b"FOO /health HTTP/1.1\r\nHost: x\r\n\r\n", 501, "not_implemented"),
    (b"TRACE /health HTTP/1.1\r\nHost: x\r\n\r\n", 501, "not_implemented"),
    (b"CONNECT localhost:443 HTTP/1.1\r\nHost: x\r\n\r\n", 501, "not_implemented"),
    (b"get /health HTTP/1.1\r\nHost: x\r\n\r\n", 501, "not_implemented"),
    (b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"),
    (b"GET /health\r\nHost: x\r\n\r\n", 400, "invalid_request"),
    (b"GET /hea lth HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_request"),
    (b"GET health HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_request"),
    (b"GET //a:b/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_request"),
    (b"GET //x/admin/tenants HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_request"),
    (b"GET /health HTTP/1.1\r\n\r\n", 400, "invalid_request"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "invalid_request"),
    (b"GET /health HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "invalid_request"),
    (b"GET /health HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "invalid_request"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", 400, "invalid_request"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n", 400, "invalid_request"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: \x01\r\n\r\n", 400, "invalid_request"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n\r\n", 417, "expectation_failed"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 400,
     "invalid_request"),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\n{}", 400,
     "invalid_request"),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
     501, "not_implemented"),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
     b"Content-Length: 2\r\n\r\n", 400, "invalid_request"),
    (b"POST /v1/embeddings HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
     "invalid_request"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
     "invalid_request"),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n"
     b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "invalid_request"),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0x2\r\n", 400, "invalid_request"),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n" + b"X-Pad: " + b"p" * 900 + b"\r\n" * 1 +
     (b"X-Pad: " + b"p" * 900 + b"\r\n") * 20, 431, "request_header_too_large"),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}}\r\n", 400, "invalid_request"),
    # a chunk's lines end in CRLF alone (a bare LF is how requests are smuggled past a
    # proxy that reads them otherwise)
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n2\n{}\r\n0\r\n\r\n", 400, "invalid_request"),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\n\r\n", 400, "invalid_request"),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n2\n{}\n0\n\n", 400, "invalid_request"),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nno colon\r\n", 400,
     "invalid_request"),
])
def test_malformed_requests_get_json_errors(server, raw, status, code):
    got = exchange(server, raw[:-4] + b"\r\nX-Request-Id: mine\r\n\r\n"
                   if raw.endswith(b"\r\n\r\n") else raw)
    assert len(got) == 1
    st, headers, body = got[0]
    assert (st, headers["connection"]) == (status, "close")
    assert json.loads(body)["error"]["code"] == code
    if raw.endswith(b"\r\n\r\n"):
        assert headers["x-request-id"] == "mine"


def test_a_full_head_with_a_request_id_is_refused_cleanly(make_server):
    # the 431 looks for the client's X-Request-Id in a head that never ended
    server = make_server("[server]\nmax_header_bytes = 1K\n")
    pre = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Request-Id: "
    got = exchange(server, pre + b"a" * (1024 - len(pre)))
    assert [g[0] for g in got] == [431]
    with client(server) as c:
        assert c.get("/health").status_code == 200  # still serving


def test_a_body_on_head_cannot_hide_a_request(server):
    hidden = (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
              b"\r\n2a\r\n" + b'{"model":"all-minilm-l6-v2","input":"hi"}' + b"\r\n0\r\n\r\n")
    got = exchange(server, b"HEAD /health HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                   % len(hidden) + hidden, bodiless=(0,))
    assert [g[0] for g in got] == [400]


def test_absolute_form_target(server):
    got = exchange(server, b"GET https://localhost:8443/health HTTP/1.1\r\nHost: x\r\n"
                           b"Connection: close\r\n\r\n")
    assert [g[0] for g in got] == [200] and b'"status":"ok"' in got[0][2]


def test_connection_close_ends_pipelined_requests(server):
    got = exchange(server, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                           b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    assert [g[0] for g in got] == [200] and b'"status":"ok"' in got[0][2]


def test_pipelined_head_waits_for_a_long_reply(make_server):
    # the next request's head, half sent while an answer is being generated, must not
    # time out (and take the answer with it): its clock starts when its turn comes
    server = make_server("[server]\nheader_timeout_ms = 50\n")
    chat = json.dumps({"model": "smollm2-135m-instruct", "max_tokens": 64, "temperature": 0,
                       "messages": [{"role": "user", "content": "Count from 1 to 100."}]})
    s = server.tls_socket(timeout=60)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nCache-Control: no-store\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(chat), chat.encode()) +
              b"GET /health HTTP/1.1\r\nHo")
    time.sleep(0.2)
    s.sendall(b"st: x\r\nConnection: close\r\n\r\n")
    got = split_responses(read_to_eof(s))
    s.close()
    assert [g[0] for g in got] == [200, 200]
    assert json.loads(got[0][2])["usage"]["completion_tokens"] > 0
    assert b'"status":"ok"' in got[1][2]


def test_http10_request(server):
    s = server.tls_socket()
    s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):  # HTTP/1.0 without keep-alive: the close ends the body
        data += chunk
    s.close()
    assert data.startswith(b"HTTP/1.0 200 OK\r\n")
    assert b"\r\nDate: " in data.partition(b"\r\n\r\n")[0]
    assert data.endswith(b'"device":"cpu"}' if DEVICE == "cpu" else b')"}')


def test_http10_keep_alive_stream_ends_with_the_connection(server):
    """HTTP/1.0 has no chunked framing: a stream asked with keep-alive was framed with
    Content-Length: 0 and then sent anyway on a connection kept open."""
    body = json.dumps({"model": "smollm2-135m-instruct", "stream": True, "max_tokens": 8,
                       "temperature": 0, "messages": [{"role": "user", "content": "Hi"}]})
    s = server.tls_socket(timeout=60)
    s.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nConnection: keep-alive\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (len(body), body.encode()))
    data = b""
    while chunk := s.recv(65536):  # the server closes: that ends the stream
        data += chunk
    s.close()
    head, _, events = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v for k, v in (l.split(": ", 1) for l in lines[1:])}
    assert lines[0] == "HTTP/1.0 200 OK", lines
    assert "content-length" not in headers and headers["connection"] == "close", headers
    assert "date" in headers  # RFC 9110: an origin server with a clock sends one
    assert events.startswith(b"data: {") and events.endswith(b"data: [DONE]\n\n"), events


def test_plain_http_on_the_tls_port_is_told_to_use_https(server):
    """A client given http:// instead of https:// got an empty reply (curl: "Empty reply
    from server", the SDK: "Connection error.")."""
    for request in (b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Length: 2\r\n\r\n{}"):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        s.close()
        assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n"), data
        assert data.endswith(b"use https:// in the address.\r\n"), data
    assert httpx.get(server.base_url + "/health", verify=server.ssl_context()).status_code == 200


def test_tls_1_2_and_1_3_accepted(server):
    for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        s = server.tls_socket(server.ssl_context(minimum_version=v, maximum_version=v))
        assert s.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                               ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[v]
        s.close()


def tls11_client_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ctx.minimum_version = ssl.TLSVersion.TLSv1_1
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    return ctx


def test_tls_1_2_offers_only_aead_suites_with_forward_secrecy(server):
    """OpenSSL's default list also took the CBC suites (ECDHE-ECDSA-AES128-SHA and the
    like), which Mozilla's intermediate profile leaves out."""
    def tls12(ciphers):
        ctx = ssl.create_default_context(cafile=server.cert)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers(ciphers)  # (outside the raises below: the client has them all)
        return ctx

    for cbc in ("ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384"):
        ctx = tls12(cbc)
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        with pytest.raises(ssl.SSLError, match="HANDSHAKE_FAILURE|NO_SHARED_CIPHER|alert"):
            ctx.wrap_socket(raw, server_hostname="localhost")
        raw.close()
    for aead in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"):
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s = tls12(aead).wrap_socket(raw, server_hostname="localhost")
        assert s.cipher()[0] == aead and s.version() == "TLSv1.2"
        s.close()


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated")
def test_tls_1_1_refused(server):
    # control: this client does complete a TLS 1.1 handshake with a server that allows it
    # (openssl s_server), so a failure below is the gateway's refusal
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    key = server.data_dir / "tls" / "key.pem"
    ref = subprocess.Popen(["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert",
                            server.cert, "-key", str(key), "-tls1_1", "-cipher",
                            "DEFAULT:@SECLEVEL=0", "-naccept", "1", "-quiet"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                raw = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        s = tls11_client_context().wrap_socket(raw)
        assert s.version() == "TLSv1.1"
        s.close()
    finally:
        ref.kill()
        ref.wait()

    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    with pytest.raises(ssl.SSLError) as e:
        tls11_client_context().wrap_socket(raw)
    assert "PROTOCOL_VERSION" in str(e.value).upper() or "VERSION" in str(e.value).upper()
    raw.close()


def test_max_connections_pauses_accepting(make_server):
    server = make_server("[server]\nmax_connections = 2\n")
    a = server.tls_socket()
    b = server.tls_socket()
    # the third connection waits in the backlog: no TLS handshake while two are open
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=0.5)
    ctx = server.ssl_context()
    with pytest.raises((socket.timeout, TimeoutError)):
        ctx.wrap_socket(raw, server_hostname="localhost")
    raw.close()
    a.close()
    time.sleep(0.3)
    c = server.tls_socket()  # accepted again once one closed
    c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_http_response(c)[0] == 200
    c.close()
    b.close()


def test_max_connections_closes_the_longest_idle_keep_alive(make_server):
    """Idle keep-alive clients held every place at max_connections, /health with them, for
    idle_timeout_ms. The one idle longest is closed to make room (a client reopens it);
    a connection with a request in progress, or none answered yet, is not."""
    server = make_server("[server]\nmax_connections = 2\n")
    a, b = server.tls_socket(), server.tls_socket()
    for s in (a, b):
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_http_response(s)[0] == 200
    c = server.tls_socket()  # a place is made for it: a, idle the longest, is closed
    c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_http_response(c)[0] == 200
    a.settimeout(2)
    assert a.recv(1) == b""
    b.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # b stays
    assert read_http_response(b)[0] == 200
    for s in (b, c):
        s.close()


def test_out_of_file_descriptors_pauses_accepting_without_spinning(make_server):
    """Where the open-file limit runs out before server.max_connections, accept() failed at
    once again and again: libevent printed a line for each (1.6 million in 5 s, not JSON)
    and a core spun. Now the start warns of the limit, accepting pauses a moment at a time,
    the log says so in one JSON line, and connections are served again once some close."""
    import resource

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))

    server = make_server("", preexec=low_limit)
    assert server.wait_log(lambda l: "open-file limit (160" in l.get("msg", ""), timeout=2)
    socks = []
    for _ in range(200):  # more than the descriptors left
        socks.append(socket.create_connection(("127.0.0.1", server.port), timeout=2))
    assert server.wait_log(lambda l: "accepting paused" in l.get("msg", "") and
                           l.get("level") == "warn", timeout=5)
    time.sleep(1)
    for s in socks:
        s.close()
    time.sleep(1)
    c = server.tls_socket()
    c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, body = read_http_response(c)
    c.close()
    assert status == 200
    failed = [l for l in body.decode().splitlines()
              if l.startswith("cachegate_http_accept_failures_total ")]
    assert failed and float(failed[0].split()[1]) > 0
    raw = [l["raw"] for l in server.lines if "raw" in l]
    assert not raw, raw[:3]
    warned = [l for l in server.lines if "accepting a connection failed" in l.get("msg", "")]
    assert 1 <= len(warned) <= 2, len(warned)


def test_graceful_shutdown_finishes_in_flight_request(make_server):
    server = make_server("[server]\nshutdown_grace_ms = 10000\n")
    idle = client(server)
    assert idle.get("/health").status_code == 200  # an idle keep-alive connection

    s = server.tls_socket()
    s.sendall(b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")
    time.sleep(0.2)
    server.signal(signal.SIGTERM)
    assert server.wait_log(lambda l: "SIGTERM" in l.get("msg", ""), timeout=5)

    # no new connections...
    time.sleep(0.2)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2)
    # ...but the request in flight completes, and is told the connection closes
    assert server.proc.poll() is None
    s.sendall(b"67890")
    status, headers, body = read_http_response(s)
    assert status == 405
    assert headers["connection"] == "close"
    assert b"method_not_allowed" in body
    s.close()
    assert server.proc.wait(timeout=5) == 0
    assert server.wait_log(lambda l: l.get("msg") == "shutdown complete", timeout=2)
    server._reader.join(timeout=5)
    assert server.lines[-1].get("msg") == "shutdown complete", server.lines[-3:]
    idle.close()


def test_shutdown_delivers_a_reply_still_going_out(make_server):
    """A reply answered but still in the server's buffers (megabytes that its client reads
    more slowly than the server wrote them) counted as done: a SIGTERM then closed the
    connection at once and the client got a cut reply. The grace covers its sending too."""
    server = make_server("[server]\nshutdown_grace_ms = 30000\n")
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a slow reader's small window
    raw.settimeout(30)
    raw.connect(("127.0.0.1", server.port))
    s = server.ssl_context().wrap_socket(raw, server_hostname="localhost")
    texts = [f"line {i} of a long import" for i in range(1500)]  # some 7 MB of JSON back
    body = json.dumps({"model": "all-minilm-l6-v2", "input": texts}).encode()
    s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert server.wait_log(lambda l: l.get("route") == "/v1/embeddings" and
                           l.get("status") == 200, timeout=120)  # answered, not yet sent
    server.signal(signal.SIGTERM)
    time.sleep(1)
    status, _, reply = read_http_response(s)
    assert status == 200 and len(json.loads(reply)["data"]) == 1500
    s.close()
    assert server.proc.wait(timeout=30) == 0


def test_shutdown_grace_period_bounds_the_wait(make_server):
    server = make_server("[server]\nshutdown_grace_ms = 500\n")
    s = server.tls_socket()
    s.sendall(b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n1")
    time.sleep(0.2)
    t0 = time.monotonic()
    server.signal(signal.SIGINT)
    assert server.proc.wait(timeout=5) == 0
    assert 0.4 < time.monotonic() - t0 < 4
    assert server.wait_log(lambda l: "grace period over" in l.get("msg", ""), timeout=2)
    s.close()


@pytest.mark.parametrize("second_signal,stream", [(False, True), (False, False),
                                                  (True, True)])
def test_shutdown_cuts_a_long_answer_cleanly(make_server, second_signal, stream):
    """An answer still running when the grace period ends (or a second signal comes) is cut
    and the process exits as documented; replying to it after its connection was freed
    crashed the server (SIGSEGV) before its store was closed."""
    server = make_server("[server]\nshutdown_grace_ms = %d\n[cache]\nenabled = false\n"
                         % (30000 if second_signal else 500))
    # greedy: its story runs to max_tokens (a sampled one sometimes ended within the grace)
    body = json.dumps({"model": "smollm2-135m-instruct", "max_tokens": 400, "stream": stream,
                       "temperature": 0,
                       "messages": [{"role": "user", "content": "Write a long story."}]})
    s = server.tls_socket(timeout=30)
    s.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
               "application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
    got = b""
    if stream:
        got = s.recv(4096)
        assert got.startswith(b"HTTP/1.1 200")  # the answer has begun
    else:
        time.sleep(0.5)
    server.signal(signal.SIGTERM)
    if second_signal:
        assert server.wait_log(lambda l: "SIGTERM" in l.get("msg", ""), timeout=5)
        server.signal(signal.SIGTERM)
    assert server.proc.wait(timeout=20) == (1 if second_signal else 0)
    if not second_signal:
        # the grace period over, the answer ends with an error its client reads, not a
        # connection cut mid-reply (an empty reply, a stream without its end)
        while chunk := s.recv(65536):
            got += chunk
        if stream:
            head, _, rest = got.partition(b"\r\n\r\n")
            assert b"chunked" in head.lower(), head
            body = b""
            while rest:  # the chunked framing undone
                size, _, rest = rest.partition(b"\r\n")
                n = int(size, 16)
                body, rest = body + rest[:n], rest[n + 2:]
                if n == 0:
                    break
            events = [e for e in body.decode(errors="replace").split("\n")
                      if e.startswith("data: ")]
            assert events[-1] == "data: [DONE]", events[-3:]
            err = json.loads(events[-2][6:])["error"]
            assert "shutting down" in err["message"] and err["type"] == "server_error", err
        else:
            assert got.startswith(b"HTTP/1.1 503"), got[:200]
            assert b"shutting down" in got
        # (not 499, the client's leaving: the server ended it); a stream's 200 says the
        # error it ended with, at warn, as a 503's line is
        line = server.wait_log(lambda l: l.get("status") == (200 if stream else 503) and
                               l.get("route") == "/v1/chat/completions", timeout=2)
        assert line and line["level"] == "warn", line
        assert line.get("stream_error") == (503 if stream else None), line
    s.close()


def start_failing(tmp_path, conf_text, *extra):
    conf = tmp_path / "bad.conf"
    conf.write_text(conf_text)
    return subprocess.run([str(BIN), "serve", "--config", str(conf), "--listen",
                           "127.0.0.1:0", "--data-dir", str(tmp_path / "d"), "--device", "cpu",
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=20)


def test_a_port_in_use_or_a_held_data_dir_fails_before_the_models_load(tmp_path, server):
    """Both were found only once the models had loaded (minutes with a large one); a
    restart loop or an operator's typo now fails in a moment, with the same message."""
    r = start_failing(tmp_path, "", "--listen", f"127.0.0.1:{server.port}")
    assert r.returncode == 1 and "Address already in use" in r.stderr, r.stderr
    assert "embedder: " not in r.stderr
    r = start_failing(tmp_path, "", "--data-dir", str(server.data_dir))
    assert r.returncode == 1 and "in use by another cachegate process" in r.stderr, r.stderr
    assert "embedder: " not in r.stderr


def test_missing_certificate_fails_clearly(tmp_path):
    r = start_failing(tmp_path, "[tls]\ncert_file = /nonexistent/cert.pem\n"
                                "key_file = /nonexistent/key.pem\n")
    assert r.returncode == 1
    assert "TLS certificate '/nonexistent/cert.pem' cannot be read" in r.stderr
    assert "No such file or directory" in r.stderr


def test_encrypted_or_damaged_keys_fail_clearly(tmp_path):
    files = tmp_path / "certs"
    make_cert(files, "locked", 30)
    encrypt_key(files / "key.pem")
    r = start_failing(tmp_path, f"[tls]\ncert_file = {files}/cert.pem\n"
                                f"key_file = {files}/key.pem\n")
    assert r.returncode == 1 and "is encrypted: a passphrase is not supported" in r.stderr
    assert "pass phrase" not in r.stderr.lower()
    # the two files swapped: said so, not OpenSSL's bare "PEM lib"
    make_cert(files, "swapped", 30)
    r = start_failing(tmp_path, f"[tls]\ncert_file = {files}/key.pem\n"
                                f"key_file = {files}/cert.pem\n")
    assert r.returncode == 1 and "tls.cert_file and tls.key_file swapped?" in r.stderr, r.stderr
    # the self-signed pair the server made, damaged (a crash while it was written): how to
    # have a new one made is said
    tls = tmp_path / "d" / "tls"
    make_cert(tls, "made", 30)
    (tls / "key.pem").write_text("")
    r = start_failing(tmp_path, "")
    assert r.returncode == 1 and f"delete {tls}/cert.pem and {tls}/key.pem" in r.stderr, r.stderr


def test_bad_config_fails_with_file_and_line(tmp_path):
    r = start_failing(tmp_path, "[server]\nmax_body_bytes = 1M\nmax_bdy_bytes = 2M\n")
    assert r.returncode == 2
    assert f"{tmp_path / 'bad.conf'}:3: unknown key 'max_bdy_bytes' in section [server]" in r.stderr


def test_max_model_len_over_the_context_is_said(make_server):
    server = make_server("[engine]\nmax_model_len = 1000000\n")
    line = server.wait_log(lambda l: "max_model_len" in l.get("msg", ""), timeout=5)
    assert line and line["level"] == "warn" and line["asked"] == 1000000  # (numbers, bare)
    assert line["context"] < 1000000


def test_help_on_every_command():
    def run(*args):
        return subprocess.run([str(BIN), *args], cwd=ROOT, capture_output=True, text=True)
    # each command's --help (wherever it stands) and `help COMMAND` tell of that command
    for args, says in ((["serve", "--help"], "--listen HOST:PORT overrides"),
                       (["embed", "--help"], "sentence embedding"),
                       (["generate", "-h"], "--max-tokens N     at most N tokens (default 256)"),
                       (["cache", "import", "--help"], "JSON lines"),
                       (["tenant", "list", "--help"], "requests_per_minute"),
                       (["key", "create", "x", "--help"], "revoke takes a key or its"),
                       (["usage", "--help"], "per tenant and day"),
                       (["device", "--help"], "where the models would run"),
                       (["help", "tenant"], "requests_per_minute")):
        p = run(*args)
        assert p.returncode == 0 and says in p.stdout, args
        assert "usage: cachegate " + args[args[0] == "help"] in p.stdout, args
    p = run("help")
    assert p.returncode == 0 and "usage: cachegate serve" in p.stdout
    assert "cachegate usage [--tenant NAME]" in p.stdout
    # a usage error shows the command's own usage
    p = run("embed", "--bogus")
    assert p.returncode == 2 and "unrecognized option '--bogus'" in p.stderr
    assert "usage: cachegate embed" in p.stderr and "cachegate serve" not in p.stderr
    p = run("help", "bogus")
    assert p.returncode == 2 and "no command 'bogus'" in p.stderr
    assert run("version", "extra").returncode == 2


def test_device_runs_anywhere(tmp_path):
    """`device` reads nothing but the device from the configuration: like embed and generate
    it runs outside the source tree without the shipped file, which it used to demand."""
    p = subprocess.run([str(BIN), "device"], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["device"]
    p = subprocess.run([str(BIN), "device", "--config", "missing.conf"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == 2 and "missing.conf: cannot open" in p.stderr


def test_bad_override_fails(tmp_path):
    r = start_failing(tmp_path, "", "--device", "tpu")
    assert r.returncode == 2
    assert "--device: server.device: 'tpu' is not one of auto, cpu, cuda" in r.stderr


def test_device_cuda_fails_without_gpu(tmp_path):
    probe = subprocess.run([str(BIN), "device"], cwd=ROOT, capture_output=True, text=True)
    if '"cuda":true' in probe.stdout:
        pytest.skip("a GPU is present")
    r = start_failing(tmp_path, "", "--device", "cuda")
    assert r.returncode == 1
    assert "device = cuda, but" in r.stderr


def test_self_signed_certificate_is_reused(tmp_path, make_server):
    s1 = make_server()
    pem = open(s1.cert).read()
    assert s1.wait_log(lambda l: l.get("msg") == "generated a self-signed TLS certificate")
    assert s1.stop() == 0
    s2 = make_server()
    assert open(s2.cert).read() == pem
    assert s2.wait_log(lambda l: "generated" in l.get("msg", ""), timeout=0.5) is None
    with client(s2) as c:  # verifies against the same certificate, for host 127.0.0.1
        assert c.get("/health").status_code == 200


def test_two_generated_certificates_are_trusted_together(tmp_path, make_server):
    """Every generated certificate had the same subject: a client trusting two servers' (one
    bundle, or a certificate generated again beside the old one) found the first by name
    for both, and failed "self-signed certificate" on the other."""
    s1 = make_server()
    (tmp_path / "two").mkdir()
    s2 = Server(tmp_path / "two")
    try:
        bundle = tmp_path / "bundle.pem"
        bundle.write_text(open(s1.cert).read() + open(s2.cert).read())
        for s in (s1, s2):
            ctx = ssl.create_default_context(cafile=str(bundle))
            with httpx.Client(base_url=s.base_url, verify=ctx) as c:
                assert c.get("/health").status_code == 200
    finally:
        s2.stop()


def make_cert(directory, name, days):
    """A self-signed P-256 certificate for 127.0.0.1 and localhost, written over
    directory/cert.pem and key.pem; its DER."""
    directory.mkdir(exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(directory / "key.pem"),
                    "-out", str(directory / "cert.pem"), "-days", str(days), "-subj",
                    f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return ssl.PEM_cert_to_DER_cert((directory / "cert.pem").read_text())


def encrypt_key(path):
    """The key at path written over encrypted with a passphrase."""
    out = subprocess.run(["openssl", "pkey", "-in", str(path), "-aes256", "-passout",
                          "pass:secret"], check=True, capture_output=True).stdout
    path.write_bytes(out)


def served_certificate(server):
    """The DER certificate a new connection is served."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with server.tls_socket(ctx) as s:
        return s.getpeercert(binary_form=True)


def metric_value(server, series):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with httpx.Client(base_url=server.base_url, verify=ctx, timeout=10) as c:
        for line in c.get("/metrics").text.splitlines():
            if line.startswith(series + " "):
                return float(line.split()[1])
    return None


def test_sighup_reloads_the_certificate_for_new_connections(tmp_path, make_server):
    """A renewed certificate is served without a restart: SIGHUP reads the files again, new
    connections get the new certificate, an open connection goes on, and /metrics says when
    the one served expires. A pair that does not load leaves the one before in service."""
    files = tmp_path / "certs"
    first = make_cert(files, "first", 30)
    server = make_server(f"[tls]\ncert_file = {files}/cert.pem\nkey_file = {files}/key.pem\n")
    assert served_certificate(server) == first
    expiry = "cachegate_tls_certificate_expiry_timestamp_seconds"
    assert abs(metric_value(server, expiry) - (time.time() + 30 * 86400)) < 2 * 86400
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=ssl.DER_cert_to_PEM_cert(first))
    kept = server.tls_socket(ctx)  # verified against the first certificate
    health = b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"
    kept.sendall(health)
    assert read_http_response(kept)[0] == 200

    second = make_cert(files, "second", 90)
    server.signal(signal.SIGHUP)
    line = server.wait_log(lambda l: l.get("msg") == "SIGHUP: TLS certificate reloaded")
    assert line and "CN=second" in line["subject"], line
    assert served_certificate(server) == second
    kept.sendall(health)  # the connection opened before goes on with its own
    assert read_http_response(kept)[0] == 200
    kept.close()
    assert abs(metric_value(server, expiry) - (time.time() + 90 * 86400)) < 2 * 86400
    assert metric_value(server, 'cachegate_tls_reloads_total{result="ok"}') == 1

    make_cert(tmp_path / "other", "other", 30)  # a key that is not the certificate's
    (files / "key.pem").write_bytes((tmp_path / "other" / "key.pem").read_bytes())
    server.signal(signal.SIGHUP)
    line = server.wait_log(lambda l: "not reloaded" in l.get("msg", ""))
    assert line and "key values mismatch" in line["error"], line
    assert served_certificate(server) == second
    assert metric_value(server, 'cachegate_tls_reloads_total{result="failed"}') == 1
    assert server.proc.poll() is None

    # an encrypted key: refused at once, never asked for (a passphrase prompt on the
    # terminal would hold the event loop), the pair before still served
    make_cert(files, "third", 30)
    encrypt_key(files / "key.pem")
    server.signal(signal.SIGHUP)
    line = server.wait_log(lambda l: "not reloaded" in l.get("msg", "") and
                           "encrypted" in l.get("error", ""))
    assert line and "a passphrase is not supported" in line["error"], line
    assert served_certificate(server) == second
    assert metric_value(server, 'cachegate_tls_reloads_total{result="failed"}') == 2


def start_bare(tmp_path):
    """A server started without waiting for it, its log lines to read from proc.stderr."""
    conf = tmp_path / "c.conf"
    conf.write_text("")
    return subprocess.Popen([str(BIN), "serve", "--config", str(conf), "--listen",
                             "127.0.0.1:0", "--data-dir", str(tmp_path / "data"), "--device",
                             DEVICE], cwd=ROOT, stderr=subprocess.PIPE, text=True)


def signal_while_loading(proc, sig, stop):
    """The log messages of a server started bare, sig sent to it once its models begin to
    load; read until stop(messages) or the log ends."""
    msgs = []
    for line in proc.stderr:
        msgs.append(json.loads(line).get("msg", ""))
        if msgs[-1].startswith("embedder: "):  # the models load from here on
            proc.send_signal(sig)
        if stop(msgs):
            break
    return msgs


def test_sighup_while_starting_is_a_reload_once_listening(tmp_path):
    """A reload asked while the models load (a renewal hook meeting a restart) was lost, or
    before that killed the server: it is done once the server listens."""
    proc = start_bare(tmp_path)
    killer = threading.Timer(60, proc.kill)  # a reload that never comes ends the read
    killer.start()
    try:
        msgs = signal_while_loading(proc, signal.SIGHUP, lambda m: "listening" in m and
                                    "SIGHUP: TLS certificate reloaded" in m)
        assert "SIGHUP: TLS certificate reloaded" in msgs, msgs
        assert proc.poll() is None
    finally:
        killer.cancel()
        proc.terminate()
        proc.wait(15)


def test_sigterm_while_starting_is_a_graceful_stop(tmp_path):
    """A stop asked while the models load (systemd stopping a service that is starting) was
    the signal's default action, exit status 143, against the README's 0 for a graceful
    stop: the server now stops as soon as it has started, and exits 0."""
    proc = start_bare(tmp_path)
    try:
        msgs = signal_while_loading(proc, signal.SIGTERM, lambda m: False)
        assert proc.wait(30) == 0, msgs
        assert "SIGTERM came while starting: stopping" in msgs, msgs
        assert msgs[-1] == "shutdown complete", msgs
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(15)


def test_sighup_with_a_generated_certificate_never_generates_another(make_server):
    """With both tls keys empty a missing DATA_DIR/tls file is made at the first start only:
    a reload that finds one missing fails and keeps the certificate served, rather than
    serving a new self-signed one."""
    server = make_server()
    first = served_certificate(server)
    (server.data_dir / "tls" / "key.pem").unlink()
    server.signal(signal.SIGHUP)
    line = server.wait_log(lambda l: "not reloaded" in l.get("msg", ""))
    assert line and "missing" in line["error"], line
    assert served_certificate(server) == first
    assert not (server.data_dir / "tls" / "key.pem").exists()


def test_shutdown_closes_many_idle_connections(server):
    socks = []
    for _ in range(16):
        s = server.tls_socket()
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_http_response(s)[0] == 200
        socks.append(s)  # now idle, kept alive
    t0 = time.monotonic()
    server.signal(signal.SIGTERM)
    assert server.proc.wait(timeout=5) == 0
    assert time.monotonic() - t0 < 2  # idle connections do not hold the drain
    for s in socks:
        assert s.recv(1024) == b""
        s.close()


def test_many_clients_leaving_mid_response(server):
    # Clients that send a request and close at once (as a load generator does when it
    # stops): the server reads the request and the end of the stream together, queues the
    # reply, and frees the connection right after. Several rounds, then the server must
    # still be up and answering.
    for _ in range(6):
        socks = []
        for _ in range(48):
            s = server.tls_socket()
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_http_response(s)[0] == 200  # a kept-alive connection
            socks.append(s)
        for s in socks:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        for s in socks:
            s.close()
        time.sleep(0.2)
        assert server.proc.poll() is None
    with client(server) as c:
        assert c.get("/health").status_code == 200
    assert server.proc.poll() is None
