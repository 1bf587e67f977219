"""The MCP server over HTTP as a process of its own, for tests that talk to it as clients do."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.servers import ROOT, free_port, wait_until_serving


@contextmanager
def mcp_http_server(api_url: str, *options: str, host: str = "127.0.0.1") -> Iterator[str]:
    """``python -m app.mcp --http`` on a free port of ``host``; yields its ``/mcp`` URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.mcp", "--http", "--host", host, "--port", str(port), *options],
        cwd=ROOT,
        env={**os.environ, "CALENDAR_API_URL": api_url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_serving(f"http://{host}:{port}/mcp")  # any answer will do
        yield f"http://{host}:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=15)
