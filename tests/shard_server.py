"""A real HTTP server on 127.0.0.1 serving a directory, with byte ranges (the bytes sent
counted), a per-request latency, a bandwidth cap, and injectable faults (a connection dropped
mid-file, a 503, a truncated file). The shard and table tests use it, and so does
benchmarks/shards.py."""

from __future__ import annotations

import http.server
import multiprocessing
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class ShardServer:
    """``with ShardServer(directory) as server: server.url("part-000.tar")``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.latency_s = 0.0
        self.bytes_per_s: float | None = None  # a bandwidth cap per connection
        self.drop_next: Counter[str] = Counter()  # name -> how many GETs to cut halfway
        self.fail_next: Counter[str] = Counter()  # name -> how many GETs to answer with 503
        self.truncate: dict[str, int] = {}  # name -> bytes to serve (Content-Length too)
        self.gets: Counter[str] = Counter()
        self.ranges: Counter[str] = Counter()
        self.bytes_sent: Counter[str] = Counter()  # name -> bytes of bodies sent
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                path = os.path.join(server.directory, self.path.lstrip("/"))
                if not os.path.isfile(path):
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(os.path.getsize(path)))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()

            def do_GET(self) -> None:
                name = self.path.lstrip("/")
                path = os.path.join(server.directory, name)
                time.sleep(server.latency_s)
                if not os.path.isfile(path):
                    self.send_error(404)
                    return
                if server.fail_next[name] > 0:
                    server.fail_next[name] -= 1
                    self.send_error(503)
                    return
                with open(path, "rb") as stream:
                    data = stream.read()
                data = data[: server.truncate.get(name, len(data))]
                wanted = self.headers.get("Range")
                if wanted:
                    server.ranges[name] += 1
                    first, last = (int(x) for x in wanted.removeprefix("bytes=").split("-"))
                    data = data[first : last + 1]
                    self.send_response(206)
                else:
                    server.gets[name] += 1
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                server.bytes_sent[name] += len(data)
                if server.drop_next[name] > 0:
                    server.drop_next[name] -= 1
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                server.send(self.wfile, data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        assert self.httpd.server_address[0] == "127.0.0.1", self.httpd.server_address
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def send(self, out, data: bytes) -> None:
        if self.bytes_per_s is None:
            out.write(data)
            return
        chunk = 256 * 1024
        started = time.perf_counter()
        for start in range(0, len(data), chunk):
            out.write(data[start : start + chunk])
            ahead = (start + chunk) / self.bytes_per_s - (time.perf_counter() - started)
            if ahead > 0:
                time.sleep(ahead)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def __enter__(self) -> ShardServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _serve(directory: str, latency_s: float, bytes_per_s: float | None, ports: object) -> None:
    server = ShardServer(directory)
    server.latency_s, server.bytes_per_s = latency_s, bytes_per_s
    ports.put(server.httpd.server_address[1])  # type: ignore[attr-defined]
    server.httpd.serve_forever()


@contextmanager
def served_from_another_process(
    directory: str, latency_s: float = 0.0, bytes_per_s: float | None = None
) -> Iterator[Callable[[str], str]]:
    """A ShardServer in its own process (as a remote server would be: its work does not
    share the loader's interpreter); yields name -> URL."""
    context = multiprocessing.get_context("fork")
    ports = context.Queue()
    process = context.Process(
        target=_serve, args=(directory, latency_s, bytes_per_s, ports), daemon=True
    )
    process.start()
    try:
        port = ports.get(timeout=30)
        yield lambda name: f"http://127.0.0.1:{port}/{name}"
    finally:
        process.terminate()
        process.join()


def counting_bodies(app: Callable, sent: Counter[str]) -> Callable:
    """A WSGI middleware adding the bytes of each GET response's body to ``sent[path]``."""

    def counted(environ: dict, start_response: Callable) -> Iterator[bytes]:
        body = app(environ, start_response)
        try:
            for chunk in body:
                if environ["REQUEST_METHOD"] == "GET":
                    sent[environ["PATH_INFO"]] += len(chunk)
                yield chunk
        finally:
            getattr(body, "close", lambda: None)()

    return counted


@contextmanager
def local_s3_server(sent: Counter[str] | None = None) -> Iterator[str]:
    """A real S3-compatible server (moto's) on 127.0.0.1 for the test's length; yields its
    endpoint URL. With ``sent``, the bytes of the objects it serves are counted there by
    path (``/bucket/key``). Skips the test where moto or s3fs is not installed."""
    import pytest

    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    from moto.moto_server import werkzeug_app
    from werkzeug.serving import make_server

    class CountingMotoServer(moto_server.ThreadedMotoServer):
        def _server_entry(self) -> None:  # moto's own, with the app wrapped
            app = werkzeug_app.DomainDispatcherApplication(werkzeug_app.create_backend_app)
            if sent is not None:
                app = counting_bodies(app, sent)
            self._server = make_server(
                self._ip_address,
                self._port,
                app,
                True,
                request_handler=werkzeug_app.MotoRequestHandler,
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    server = CountingMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        assert host == "127.0.0.1", f"the S3 server listens on {host}, not loopback"
        yield f"http://{host}:{port}"
    finally:
        server.stop()
