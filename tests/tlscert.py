"""A self-signed TLS certificate for loopback test servers (made by openssl), and server contexts from it."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path
from typing import Tuple


def self_signed(where: Path) -> Tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost valid for two days, and its key: (cert.pem, key.pem)."""
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True,
        capture_output=True,
    )
    return cert, key


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A TLS server context presenting ``cert``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
