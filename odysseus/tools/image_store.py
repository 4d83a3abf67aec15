"""Where generated images live: ``DATA_DIR/images/img_<random>.<ext>``, each recorded with its owner.

Tools hand image bytes to ``ToolContext.save_image`` (bound to ``ImageStore.save``) and get our
own URL back (``/api/images/<name>``), which only the owner may read (``routes/image_routes.py``).
A deleted session's images go with it (``forget``).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from typing import Iterable, Optional

IMAGE_NAME = re.compile(r"^img_[A-Za-z0-9_-]{16,64}\.(png|jpg|webp|gif)$")
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}


class ImageStore:
    """The image files under ``DATA_DIR/images`` and their rows in ``store.images``."""

    def __init__(self, store, data_dir: str):
        self.store = store
        self.folder = os.path.join(data_dir, "images")

    def save(self, owner: str, session_id: Optional[str], data: bytes, mime: str) -> str:
        """Store image bytes, record the owner, return our URL."""
        name = f"img_{secrets.token_urlsafe(16)}.{EXTENSIONS.get(mime, 'png')}"
        os.makedirs(self.folder, exist_ok=True)
        tmp = os.path.join(self.folder, f".{name}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, os.path.join(self.folder, name))
        self.store.images.add(name, owner, session_id, mime, len(data))
        return f"/api/images/{name}"

    def find(self, owner: str, name: str) -> Optional[dict]:
        """The owner's image ``name`` with its file's ``path``, or None (unknown, foreign, or its file gone)."""
        if not IMAGE_NAME.match(name):
            return None
        row = self.store.images.get(owner, name)
        path = os.path.join(self.folder, name)
        if row is None or not os.path.isfile(path):
            return None
        return dict(row, path=os.path.abspath(path))

    def forget(self, names: Iterable[str]) -> None:
        """Remove the files of a deleted session's images (their rows went with the session)."""
        for name in names:
            if IMAGE_NAME.match(name):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.folder, name))
