"""Static files that load fast: fingerprinted URLs, immutable caching, gzip.

The page references every static file by a *fingerprinted* URL, its name with a hash of its
content before the extension (``js/chat.js`` -> ``/static/js/chat.0123456789ab.js``). Such a URL
names one content for ever, so it is served with ``Cache-Control: public, max-age=31536000,
immutable`` and a reload asks the server for nothing but the page itself.

ES modules import each other by plain relative names (``./render.js``); the page carries an
import map (``import_map()``) that maps each plain URL to its fingerprinted one, so imports, dynamic
imports and ``import.meta.resolve`` (the lazy loaders of mermaid and KaTeX use it) all reach the
fingerprinted files without a build step.

The plain URL still works (old pages, hand-written links) with ``Cache-Control: no-cache`` and an
ETag, so a client always revalidates it. A fingerprinted URL whose hash is not the current
content's (a page from before a deploy) gets the current content, also with ``no-cache``: nothing
wrong is ever cached for a year.

Text types (JS, CSS, SVG, JSON, maps) are sent gzip-compressed to clients that accept it; each file
is compressed once, off the gevent hub, on first use, and kept in a bounded in-memory cache keyed
by its content hash.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
import os
import re
import threading
from collections import OrderedDict
from typing import Any, Optional

from flask import Flask, Response, abort, current_app, request, send_from_directory
from werkzeug.wrappers import Response as BaseResponse

from odysseus.runs.native import offload

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
HASH_LENGTH = 12
# name.<12 hex>.ext -> name.ext (the extension is the last dot's; "katex.min.<hash>.js" works too).
_FINGERPRINTED = re.compile(r"^(?P<stem>.+)\.(?P<hash>[0-9a-f]{%d})(?P<ext>\.[A-Za-z0-9]+)$" % HASH_LENGTH)
# A relative url() in a style sheet: not absolute, not a scheme (data:, https:), not a fragment.
_CSS_URL = re.compile(rb"""url\((?P<quote>['"]?)(?P<ref>(?![a-zA-Z][a-zA-Z0-9+.-]*:|/|#)[^'")\s]+)(?P=quote)\)""")
# A static import or re-export of a relative module: `import {x} from "./a.js"`, `import "./b.js"`.
_STATIC_IMPORT = re.compile(
    rb"""^\s*(?:import|export)\s+(?:[^'";]*?\s+from\s+)?['"](?P<ref>\.{1,2}/[^'"]+)['"]""", re.M
)
_COMPRESSIBLE = {".js", ".mjs", ".css", ".svg", ".json", ".map", ".txt", ".html"}
# Files the import map covers: everything a module may import or a loader may resolve.
_MAPPED = {".js", ".mjs", ".css"}
_CACHE_BYTES = 48 * 1024 * 1024
EXTENSION_KEY = "odysseus.static_assets"


class AssetManifest:
    """Content hashes of the files under one static folder, recomputed when a file changes."""

    def __init__(self, root: str, url_prefix: str = "/static") -> None:
        self.root = os.path.realpath(root)
        self.url_prefix = url_prefix.rstrip("/")
        self._hashes: dict[str, tuple[int, int, str]] = {}
        self._gzipped: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._gzipped_bytes = 0
        self._lock = threading.Lock()
        self._preloads: dict[str, tuple[list[tuple[str, Optional[str]]], list[str]]] = {}

    def path_of(self, filename: str) -> Optional[str]:
        """The absolute path of ``filename`` inside the root, or None (missing, or outside it)."""
        if "\x00" in filename or filename.startswith("/"):
            return None
        path = os.path.realpath(os.path.join(self.root, filename))
        if not path.startswith(self.root + os.sep) or not os.path.isfile(path):
            return None
        return path

    def fingerprint(self, filename: str) -> Optional[str]:
        """The content hash of ``filename`` (first HASH_LENGTH hex digits of its SHA-256), or None."""
        path = self.path_of(filename)
        if path is None:
            return None
        stat = os.stat(path)
        known = self._hashes.get(path)
        if known and known[0] == stat.st_mtime_ns and known[1] == stat.st_size:
            return known[2]
        if path.endswith(".css"):
            digest = hashlib.sha256(self.content(path)).hexdigest()[:HASH_LENGTH]
        else:
            digest = offload(_hash_file, path)
        self._hashes[path] = (stat.st_mtime_ns, stat.st_size, digest)
        return digest

    def content(self, path: str) -> bytes:
        """The bytes served for the file at ``path``: a style sheet's relative ``url()`` references
        (KaTeX's fonts) are rewritten to fingerprinted names, so they too are cached for good."""
        with open(path, "rb") as handle:
            data = handle.read()
        if not path.endswith(".css"):
            return data
        folder = os.path.dirname(path)

        def rewrite(match: re.Match[bytes]) -> bytes:
            quote, ref = match["quote"], match["ref"].decode("utf-8", "replace")
            name, _, suffix = ref.partition("?")
            target = os.path.relpath(os.path.join(folder, name), self.root)
            digest = None if suffix or target.startswith("..") else self.fingerprint(target)
            if digest is None:
                return match.group(0)
            stem, ext = os.path.splitext(name)
            return b"url(" + quote + f"{stem}.{digest}{ext}".encode() + quote + b")"

        return _CSS_URL.sub(rewrite, data)

    def url(self, filename: str) -> str:
        """The fingerprinted URL of ``filename`` (its plain URL when the file is missing)."""
        digest = self.fingerprint(filename)
        if digest is None:
            return f"{self.url_prefix}/{filename}"
        stem, ext = os.path.splitext(filename)
        return f"{self.url_prefix}/{stem}.{digest}{ext}"

    def import_map(self) -> dict[str, Any]:
        """``{"imports": {plain URL: fingerprinted URL}}`` for every JS and CSS file."""
        imports: dict[str, str] = {}
        for directory, dirs, files in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if os.path.splitext(name)[1] not in _MAPPED:
                    continue
                filename = os.path.relpath(os.path.join(directory, name), self.root).replace(os.sep, "/")
                imports[f"{self.url_prefix}/{filename}"] = self.url(filename)
        return {"imports": imports}

    def module_preloads(self, entry: str) -> list[str]:
        """Fingerprinted URLs of every module ``entry`` imports statically, directly or not (``entry``
        itself left out), for ``<link rel="modulepreload">``: the browser fetches them all at once
        instead of one level of imports after another."""
        known = self._preloads.get(entry)
        if known is not None and all(self.fingerprint(name) == digest for name, digest in known[0]):
            return known[1]  # no module of the graph changed: neither did the graph
        seen: list[str] = []
        queue = [entry]
        while queue:
            filename = queue.pop(0)
            path = self.path_of(filename)
            if path is None or filename in seen:
                continue
            seen.append(filename)
            with open(path, "rb") as handle:
                source = handle.read()
            folder = os.path.dirname(filename)
            for match in _STATIC_IMPORT.finditer(source):
                ref = os.path.normpath(os.path.join(folder, match["ref"].decode("utf-8", "replace")))
                if not ref.startswith("..") and ref not in seen:
                    queue.append(ref.replace(os.sep, "/"))
        urls = [self.url(name) for name in seen[1:]]
        self._preloads[entry] = ([(name, self.fingerprint(name)) for name in seen], urls)
        return urls

    def gzipped(self, path: str, digest: str) -> bytes:
        """The gzip body of the file at ``path`` whose content hash is ``digest`` (cached)."""
        key = (path, digest)
        with self._lock:
            body = self._gzipped.get(key)
            if body is not None:
                self._gzipped.move_to_end(key)
                return body
        body = offload(_gzip, self.content(path))
        with self._lock:
            if key not in self._gzipped:
                self._gzipped[key] = body
                self._gzipped_bytes += len(body)
            while self._gzipped_bytes > _CACHE_BYTES and len(self._gzipped) > 1:
                _, dropped = self._gzipped.popitem(last=False)
                self._gzipped_bytes -= len(dropped)
        return body


def _hash_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:HASH_LENGTH]


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def manifest() -> AssetManifest:
    """The current app's manifest."""
    return current_app.extensions[EXTENSION_KEY]


def _accepts_gzip() -> bool:
    return request.accept_encodings["gzip"] > 0


def serve_static(filename: str) -> BaseResponse:
    """The static view: plain or fingerprinted names, cache headers, gzip for text types."""
    assets = manifest()
    real, wanted = filename, None
    if assets.path_of(filename) is None:
        match = _FINGERPRINTED.match(filename)
        if match is None:
            abort(404)
        real, wanted = match["stem"] + match["ext"], match["hash"]
    path = assets.path_of(real)
    if path is None:
        abort(404)
    digest = assets.fingerprint(real) or ""
    cache = IMMUTABLE if wanted is not None and wanted == digest else REVALIDATE
    ext = os.path.splitext(real)[1].lower()
    if ext in _COMPRESSIBLE:
        mimetype = mimetypes.guess_type(real)[0] or "application/octet-stream"
        if ext in (".js", ".mjs"):
            mimetype = "text/javascript"
        if _accepts_gzip():
            response = Response(assets.gzipped(path, digest), mimetype=mimetype)
            response.headers["Content-Encoding"] = "gzip"
            response.set_etag(f"{digest}-gz")
        else:
            response = Response(assets.content(path), mimetype=mimetype)
            response.set_etag(digest)
    else:
        response = send_from_directory(assets.root, real, max_age=0, etag=False)
        response.set_etag(digest)
    if ext in _COMPRESSIBLE:
        response.vary.add("Accept-Encoding")
    response.headers["Cache-Control"] = cache
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response.make_conditional(request)


def init_app(app: Flask) -> None:
    """Serve ``/static`` through :func:`serve_static` and give templates ``asset_url``/``import_map``."""
    assets = AssetManifest(app.static_folder or "", app.static_url_path or "/static")
    app.extensions[EXTENSION_KEY] = assets
    app.view_functions["static"] = serve_static
    app.jinja_env.globals["asset_url"] = assets.url
    app.jinja_env.globals["import_map"] = assets.import_map
    app.jinja_env.globals["module_preloads"] = assets.module_preloads
