"""What an uploaded file is, judged by its bytes: sniffing, image sizes, safe names, text extraction.

The client's file name and Content-Type are only hints for *text* (``notes.md`` -> ``text/markdown``);
the kind is decided by content:

- images: PNG, JPEG, GIF and WebP by magic bytes, with width/height read from their headers;
- PDF: ``%PDF-`` within the first KiB; its text is extracted with pypdf, in a child process (``extract.py``);
- text: valid UTF-8 (a BOM is dropped) or UTF-16 with a BOM, without NUL bytes and with few control
  characters; scripts with a ``#!`` line are *text* (they are never executed here, only read);
- everything else is refused: executables (ELF, PE/MZ, Mach-O, Java class) by name, other binaries
  (archives, office files, media) as unsupported.

Nothing here touches Flask or the database; the CPU-bound parts run in a thread via ``offload``.
"""

from __future__ import annotations

import os
import struct
import unicodedata
from dataclasses import dataclass
from typing import Callable, Optional, Tuple, TypeVar

from ..errors import BadRequest

T = TypeVar("T")

EXECUTABLES = (
    (b"\x7fELF", "an ELF executable"),
    (b"MZ", "a Windows executable"),
    (b"\xfe\xed\xfa\xce", "a Mach-O executable"),
    (b"\xfe\xed\xfa\xcf", "a Mach-O executable"),
    (b"\xce\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xca\xfe\xba\xbe", "a Mach-O universal binary or Java class"),
)
TEXT_MIMES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".json": "application/json",
    ".html": "text/html",
    ".htm": "text/html",
    ".xml": "application/xml",
    ".py": "text/x-python",
    ".js": "text/javascript",
    ".ts": "text/x-typescript",
    ".css": "text/css",
    ".sh": "text/x-shellscript",
    ".c": "text/x-c",
    ".h": "text/x-c",
    ".cpp": "text/x-c++",
    ".rs": "text/x-rust",
    ".go": "text/x-go",
    ".java": "text/x-java",
    ".rb": "text/x-ruby",
    ".yaml": "text/yaml",
    ".yml": "text/yaml",
    ".toml": "application/toml",
    ".sql": "application/sql",
}
NAME_MAX = 200


@dataclass
class Sniffed:
    """The verdict on one file's bytes."""

    kind: str  # "text", "pdf" or "image"
    mime: str
    width: Optional[int] = None
    height: Optional[int] = None


def offload(fn: Callable[..., T], *args) -> T:
    """Run ``fn(*args)`` in gevent's thread pool when the hub is in charge (under gunicorn), else inline."""
    try:
        from gevent import get_hub, monkey
    except ImportError:  # pragma: no cover - gevent is a dependency
        return fn(*args)
    if not monkey.is_module_patched("threading"):
        return fn(*args)
    return get_hub().threadpool.apply(fn, args)


def safe_name(raw: Optional[str]) -> str:
    """A display name from the client's file name: no directories, no control characters, bounded."""
    name = (raw or "").replace("\\", "/").split("/")[-1]
    name = "".join(ch for ch in unicodedata.normalize("NFC", name) if unicodedata.category(ch)[0] != "C")
    name = name.strip().strip(".").strip()
    if len(name) > NAME_MAX:
        stem, ext = os.path.splitext(name)
        name = stem[: NAME_MAX - len(ext[:20])] + ext[:20]
    return name or "upload"


def _png(data: bytes) -> Optional[Tuple[int, int]]:
    if len(data) >= 24 and data[12:16] == b"IHDR":
        return struct.unpack(">II", data[16:24])
    return None


def _gif(data: bytes) -> Optional[Tuple[int, int]]:
    return struct.unpack("<HH", data[6:10]) if len(data) >= 10 else None


def _jpeg(data: bytes) -> Optional[Tuple[int, int]]:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


def _webp(data: bytes) -> Optional[Tuple[int, int]]:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


IMAGES = (
    (b"\x89PNG\r\n\x1a\n", "image/png", _png),
    (b"\xff\xd8\xff", "image/jpeg", _jpeg),
    (b"GIF87a", "image/gif", _gif),
    (b"GIF89a", "image/gif", _gif),
)


def decode_text(data: bytes) -> Optional[str]:
    """The text of ``data`` when it is text (see module doc), else None."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    else:
        if b"\x00" in data:
            return None
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None
    controls = sum(1 for ch in text[:65536] if ch < " " and ch not in "\t\n\r\f\v")
    return None if controls > max(8, len(text[:65536]) // 100) else text


def sniff(data: bytes, name: str) -> Sniffed:
    """Decide what ``data`` is; BadRequest for empty, executable and unknown binary files."""
    if not data:
        raise BadRequest(f"{name}: the file is empty")
    for magic, what in EXECUTABLES:
        if data.startswith(magic) and (magic != b"MZ" or b"\x00" in data[:64]):  # "MZ..." may start a text
            raise BadRequest(f"{name}: executables are not accepted ({what})")
    for magic, mime, size in IMAGES:
        if data.startswith(magic):
            return _image(mime, size(data), name)
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return _image("image/webp", _webp(data), name)
    if b"%PDF-" in data[:1024]:
        return Sniffed("pdf", "application/pdf")
    if decode_text(data) is None:
        raise BadRequest(f"{name}: unsupported file type (text, PDF and PNG/JPEG/GIF/WebP images are accepted)")
    return Sniffed("text", TEXT_MIMES.get(os.path.splitext(name.lower())[1], "text/plain"))


def _image(mime: str, size: Optional[Tuple[int, int]], name: str) -> Sniffed:
    if not size or not all(0 < v < 100_000 for v in size):
        raise BadRequest(f"{name}: the image header is damaged")
    return Sniffed("image", mime, size[0], size[1])
