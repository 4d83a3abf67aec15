"""A real nginx in front of a live server, configured with docs/deploy.md's own nginx block.

The block is read from the document (so the test checks what operators copy), given a loopback
``listen`` on a free, non-default port, no TLS, and the live server as its upstream. nginx runs in the
foreground with one process (``master_process off``), its files in the test's directory; it is
ended by pid. .ci/run installs nginx (Debian's package)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from typing import Optional

from liveserver import ROOT, free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def documented_location(host_header: Optional[str] = None) -> str:
    """The ``location /`` block of docs/deploy.md's nginx example (its Host line replaced if asked)."""
    with open(os.path.join(ROOT, "docs", "deploy.md"), encoding="utf-8") as fh:
        text = fh.read()
    block = re.search(r"```nginx\n(.*?)```", text, re.S)
    assert block, "docs/deploy.md has an nginx block"
    location = re.search(r"(    location / \{\n.*?\n    \})", block.group(1), re.S)
    assert location, "the nginx block has a `location /`"
    body = location.group(1)
    if host_header is not None:
        body = re.sub(r"proxy_set_header Host \S+;", f"proxy_set_header Host {host_header};", body)
    return body


class Nginx:
    """nginx on 127.0.0.1:``port`` proxying to ``upstream_port`` with the documented location block."""

    def __init__(self, directory: str, upstream_port: int, host_header: Optional[str] = None):
        self.directory = directory
        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        location = documented_location(host_header).replace("127.0.0.1:5000", f"127.0.0.1:{upstream_port}")
        os.makedirs(directory, exist_ok=True)
        self.conf = os.path.join(directory, "nginx.conf")
        with open(self.conf, "w", encoding="utf-8") as fh:
            fh.write(
                f"""daemon off;
master_process off;
pid {directory}/nginx.pid;
error_log {directory}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {directory}/body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
    server {{
        listen 127.0.0.1:{self.port};
        server_name localhost;
{location}
    }}
}}
"""
            )
        self.proc: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 10.0) -> "Nginx":
        """Start nginx and wait until it accepts connections."""
        self.proc = subprocess.Popen([NGINX, "-c", self.conf], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"nginx exited: {self.proc.stderr.read().decode(errors='replace') if self.proc.stderr else ''}"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start")

    def stop(self) -> None:
        """End the nginx this object started (by its pid)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
