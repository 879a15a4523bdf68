"""A store on object storage that cannot be used says so in one line naming its URL: the package missing (exit 4
with the `pip install`), the endpoint down, the bucket missing. Endpoints are on 127.0.0.1 only: a closed port,
or a tiny S3-speaking server that answers every request with NoSuchBucket."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cli_support import cli_env

from amago_pipe.errors import MissingDependencyError, StoreFormatError
from amago_pipe.store import TrajectoryStore
from amago_pipe.testing.episodes import example_specs

URL = "s3://bucket/runs/x.zarr"
HAS_S3FS = importlib.util.find_spec("s3fs") is not None
needs_s3fs = pytest.mark.skipif(not HAS_S3FS, reason="s3fs is not installed (optional; `pip install s3fs`)")
NO_SUCH_BUCKET = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchBucket</Code>'
    b"<Message>The specified bucket does not exist</Message><BucketName>bucket</BucketName></Error>"
)


class _NoSuchBucket(BaseHTTPRequestHandler):
    """Answers every S3 request as a server without that bucket does (404 NoSuchBucket)."""

    protocol_version = "HTTP/1.1"  # answers `Expect: 100-continue` before a PUT's body

    def _reply(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"" if self.command == "HEAD" else NO_SUCH_BUCKET
        self.send_response(404)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _reply

    def log_message(self, *args: object) -> None:
        """Quiet."""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _use_endpoint(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    """fsspec's own configuration of s3:// (what FSSPEC_S3 sets): this endpoint, dummy keys, one attempt."""
    import fsspec.config

    options = {
        "endpoint_url": f"http://127.0.0.1:{port}",
        "key": "test",
        "secret": "test",
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2, "read_timeout": 5},
    }
    monkeypatch.setitem(fsspec.config.conf, "s3", options)


@pytest.fixture
def no_such_bucket() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoSuchBucket)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(HAS_S3FS, reason="s3fs is installed, so it cannot be missing")
def test_missing_s3fs_is_a_missing_dependency():
    with pytest.raises(
        MissingDependencyError,
        match=r"^s3://bucket/runs/x\.zarr: s3:// stores need the optional package 's3fs', which cannot be imported "
        r"\(No module named 's3fs'\); install it with: pip install s3fs$",
    ):
        TrajectoryStore.open(URL)


@pytest.mark.skipif(HAS_S3FS, reason="s3fs is installed, so it cannot be missing")
def test_cli_missing_s3fs_exits_4_in_one_line(amago):
    proc = amago("store", "inspect", URL)
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.startswith(f"error: {URL}: s3:// stores need the optional package 's3fs'")
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1


@needs_s3fs
def test_endpoint_down_names_the_url(monkeypatch: pytest.MonkeyPatch):
    _use_endpoint(monkeypatch, _closed_port())
    with pytest.raises(
        StoreFormatError,
        match=r"^s3://bucket/runs/x\.zarr: cannot reach the store while reading zarr\.json \(Could not connect to the "
        r"endpoint URL: .*\); check that its endpoint is up",
    ):
        TrajectoryStore.open(URL)


@needs_s3fs
def test_missing_bucket_names_the_url(monkeypatch: pytest.MonkeyPatch, no_such_bucket: int):
    _use_endpoint(monkeypatch, no_such_bucket)
    with pytest.raises(
        StoreFormatError,
        match=r"^s3://bucket/runs/x\.zarr: The specified bucket does not exist \(while writing zarr\.json\); "
        r"create the bucket first, or fix the store URL$",
    ):
        TrajectoryStore.create(URL, example_specs()["box"])


@needs_s3fs
def test_cli_endpoint_down_exits_3_in_one_line(tmp_path):
    options = {"endpoint_url": f"http://127.0.0.1:{_closed_port()}", "key": "test", "secret": "test"}
    options["config_kwargs"] = {"retries": {"max_attempts": 1}, "connect_timeout": 2}
    env = {**cli_env(), "FSSPEC_S3": json.dumps(options)}
    command = [sys.executable, "-m", "amago_pipe.cli", "store", "inspect", URL]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith(f"error: {URL}: cannot reach the store while reading zarr.json")
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1
