"""Fixtures for end-to-end tests: the real build/cachegate binary over TLS on a free
loopback port, with its own temporary data directory and configuration file."""

import json
import os
import pathlib
import signal
import socket
import ssl
import subprocess
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# absolute: some tests run it from another directory (make passes build/cachegate)
BIN = pathlib.Path(os.environ.get("CACHEGATE_BIN", ROOT / "build" / "cachegate")).absolute()
PROMTOOL = ROOT / "build" / "tools" / "promtool"
# where the servers run their models: cpu, or cuda for make test-gpu's run of the suite
DEVICE = os.environ.get("CACHEGATE_E2E_DEVICE", "cpu")


class Server:
    """A running cachegate process. Log lines (JSON) are collected from stderr."""

    def __init__(self, tmp_path, conf_text="", args=(), preexec=None):
        self.data_dir = tmp_path / "data"
        self.conf = tmp_path / "cachegate.conf"
        self.conf.write_text(conf_text)
        cmd = [str(BIN), "serve", "--config", str(self.conf), "--listen", "127.0.0.1:0",
               "--data-dir", str(self.data_dir), "--device", DEVICE, *args]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=preexec)
        self.lines = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        listening = self.wait_log(lambda l: l.get("msg") == "listening", timeout=20)
        if listening is None:
            self.stop()
            raise RuntimeError("server did not start:\n" + "\n".join(map(str, self.lines)))
        self.port = int(listening["port"])
        self.base_url = f"https://127.0.0.1:{self.port}"
        self.cert = str(self.data_dir / "tls" / "cert.pem")

    def _read(self):
        for raw in self.proc.stderr:
            try:
                line = json.loads(raw)
            except ValueError:
                line = {"raw": raw.rstrip("\n")}
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_log(self, pred, timeout=10):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if pred(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    return None
                self._cond.wait(min(left, 0.1))

    def ssl_context(self, **kw):
        ctx = ssl.create_default_context(cafile=self.cert)
        for k, v in kw.items():
            setattr(ctx, k, v)
        return ctx

    def tls_socket(self, ctx=None, timeout=5):
        """A raw TLS connection, for requests no HTTP library would send."""
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return (ctx or self.ssl_context()).wrap_socket(raw, server_hostname="localhost")

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def stop(self, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)
        return self.proc.returncode


@pytest.fixture
def make_server(tmp_path):
    servers = []

    def make(conf_text="", args=(), preexec=None):
        s = Server(tmp_path, conf_text, args, preexec)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()
    # a sanitizer build reports memory errors and leaks on stderr
    for s in servers:
        bad = [l["raw"] for l in s.lines if "raw" in l and
               ("Sanitizer" in l["raw"] or "runtime error" in l["raw"])]
        assert not bad, "\n".join(bad)


@pytest.fixture
def server(make_server):
    return make_server()


def read_http_response(sock):
    """Reads one HTTP/1.1 response with a Content-Length body from a raw socket."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the response head: %r" % buf)
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(body) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        body += chunk
    return status, headers, body[:n]
