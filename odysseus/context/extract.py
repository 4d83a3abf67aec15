"""An upload's text, extracted once, when it is uploaded; attachments and retrieval read what is stored.

Plain text is decoded in the server (bounded by the upload size). A PDF is read in a child process
(``extract_child.py``) with CPU-time, memory and wall-clock limits and a cap on the characters it
writes, waited for cooperatively (the gevent hub keeps serving): a file that bombs costs at most
those limits, once, and never the shared thread pool that other users' work (password checks,
page parsing) runs on. The text goes to ``DATA_DIR/uploads/<id>.txt`` beside the bytes.

A file past a limit is kept, with ``text_status`` ``not_extracted`` and a ``text_note`` saying which
limit; its attachments say so and the indexer skips it. ``cut`` marks a text that reached
``EXTRACT_MAX_CHARS`` (what came before the cap is kept).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..cancel import CancelToken
from ..tools.process import run_bounded
from .files import decode_text

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "extract_child.py")
EXTRACTED, CUT, NOT_EXTRACTED = "extracted", "cut", "not_extracted"
_EXIT_NOTES = {
    4: "it needed more memory than a file may use",
    5: "the PDF could not be read",
    6: "it unpacks to more than a file may",
}


@dataclass(frozen=True)
class Extracted:
    """One file's text and how far extraction got."""

    text: str
    status: str  # extracted, cut or not_extracted
    note: Optional[str] = None  # why not (or where it was cut), for the page and the model


@dataclass(frozen=True)
class ExtractLimits:
    """What one extraction may cost (``EXTRACT_*`` keys)."""

    cpu_seconds: int
    memory_bytes: int
    timeout: float
    max_chars: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "ExtractLimits":
        """The limits from the app's configuration."""
        return cls(
            int(config["EXTRACT_CPU_SECONDS"]),
            int(config["EXTRACT_MEMORY_MB"]) * 1024 * 1024,
            float(config["EXTRACT_TIMEOUT"]),
            int(config["EXTRACT_MAX_CHARS"]),
        )


def extract(kind: str, path: str, limits: ExtractLimits) -> Extracted:
    """The text of the stored file at ``path`` (``kind`` text or pdf), within ``limits``."""
    if kind == "text":
        with open(path, "rb") as fh:
            text = re.sub(r"\r\n?", "\n", decode_text(fh.read()) or "")
        if len(text) > limits.max_chars:
            return Extracted(text[: limits.max_chars], CUT, f"cut at {limits.max_chars} characters")
        return Extracted(text, EXTRACTED)
    if kind != "pdf":
        return Extracted("", EXTRACTED)
    argv = [sys.executable, "-I", CHILD, str(limits.cpu_seconds), str(limits.memory_bytes), str(limits.max_chars)]
    with open(path, "rb") as source:
        result = run_bounded(
            argv, cancel=CancelToken(), max_bytes=limits.max_chars * 4, timeout=limits.timeout, stdin=source
        )
    text = result.output.decode("utf-8", "replace")
    if result.reason == "timeout":
        return Extracted("", NOT_EXTRACTED, f"reading it took longer than {limits.timeout:g} s")
    if result.exit_code == 0:
        return Extracted(text, EXTRACTED)
    if result.exit_code == 3:
        return Extracted(text, CUT, f"cut at {limits.max_chars} characters")
    if result.exit_code is not None and result.exit_code < 0:  # a signal: the CPU limit (SIGXCPU, SIGKILL)
        return Extracted("", NOT_EXTRACTED, f"reading it needed more than {limits.cpu_seconds} s of CPU")
    return Extracted("", NOT_EXTRACTED, _EXIT_NOTES.get(result.exit_code or 0, "the file could not be read"))


def text_path(upload_path: str) -> str:
    """Where an upload's extracted text is kept (beside its bytes)."""
    return upload_path + ".txt"
