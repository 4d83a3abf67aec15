"""The ``attachments`` context source: a turn's ``attachments: [id, ...]`` go to the model.

- ``check`` (request time): the ids must be the caller's uploads (another user's id is a 404,
  a malformed list a 400); the user message's metadata keeps the chips ``{id, name, mime, size,
  width?, height?}`` so history shows them.
- ``gather`` (in the run): the first event is ``attachments`` with the same chips. Text, markdown,
  code and CSV are inlined, PDFs as their extracted text, all sharing ``ATTACH_TEXT_BUDGET``
  characters in request order: the file that crosses the budget is cut (marked), later ones are
  named as omitted. Images become provider-neutral parts ``{"type": "image", "mime", "data"}`` on
  the user's message when the model accepts images (provider option ``vision = true`` or a list
  of model globs, or the ``VISION_MODELS`` key), otherwise a notice says they were not sent.

Only the current turn's attachments are sent; later turns reach the same files through
retrieval (text and PDF uploads are indexed). The inlined text is framed as untrusted context.
"""

from __future__ import annotations

import base64
import fnmatch
from typing import Any, Callable, Dict, List, Optional

from ..errors import BadRequest
from ..events import ATTACHMENTS, Event
from . import ContextRequest, Injection, untrusted_block
from .extract import NOT_EXTRACTED
from .uploads import UploadService, valid_id

CHIP_FIELDS = ("id", "name", "mime", "size", "width", "height")


def chip(row: dict) -> dict:
    """The attachment record the page shows (no width/height for non-images)."""
    return {k: row[k] for k in CHIP_FIELDS if row.get(k) is not None}


def vision_check(globs: str) -> Callable[[Any], bool]:
    """``accepts(candidate)``: whether a candidate's model takes images (see module doc)."""
    patterns = [g.strip() for g in (globs or "").split(",") if g.strip()]

    def accepts(candidate) -> bool:
        options = getattr(getattr(candidate.provider, "config", None), "options", None) or {}
        flag = options.get("vision", options.get("images"))
        names = (candidate.model, candidate.route_id)
        if flag is True or (isinstance(flag, str) and flag.lower() in ("1", "true", "yes")):
            return True
        if isinstance(flag, list) and any(fnmatch.fnmatchcase(n, str(g)) for g in flag for n in names):
            return True
        return any(fnmatch.fnmatchcase(n, g) for g in patterns for n in names)

    return accepts


class AttachmentSource:
    """Inlines the turn's attached uploads (see module doc)."""

    name = "attachments"

    def __init__(self, service: UploadService, config: dict, resolve: Callable[[Optional[str]], list]):
        self.service, self.store = service, service.store
        self.budget = int(config["ATTACH_TEXT_BUDGET"])
        self.resolve = resolve  # model name -> candidates (the app's router)
        self.accepts = vision_check(config.get("VISION_MODELS", ""))

    def check(self, request: ContextRequest) -> Dict[str, Any]:
        """Owner-check the ids; the chips for the user's message."""
        ids = request.options.attachments
        for upload_id in ids:
            if not valid_id(upload_id):
                raise BadRequest(f"attachments: {upload_id[:80]!r} is not an upload id")
        rows = self.store.uploads.many(request.owner, ids)  # NotFound for unknown or foreign ids
        return {"attachments": [chip(row) for row in rows]} if rows else {}

    def gather(self, request: ContextRequest) -> List[Injection]:
        """The attachments event, the inlined text, the image parts and any notices."""
        ids = request.options.attachments
        if not ids:
            return []
        rows, missing = [], []
        for upload_id in ids:
            try:
                rows.append(self.store.uploads.get(request.owner, upload_id))
            except Exception:  # noqa: BLE001 - deleted since the request was checked
                missing.append(upload_id)
        images_ok = self._images_ok(request)
        blocks, parts, notices = [], [], []
        used: Dict[str, List[Any]] = {
            "inlined": [],
            "truncated": [],
            "omitted": [],
            "images": [],
            "images_not_sent": [],
        }
        left = self.budget
        for row in rows:
            if request.cancel is not None:
                request.cancel.raise_if_cancelled()
            if row["kind"] == "image":
                if images_ok:
                    data = base64.b64encode(self.service.read_bytes(row["id"])).decode("ascii")
                    parts.append({"type": "image", "mime": row["mime"], "data": data, "name": row["name"]})
                    used["images"].append(row["name"])
                else:
                    used["images_not_sent"].append(row["name"])
                continue
            if left <= 0:
                used["omitted"].append(row["name"])
                continue
            try:
                extracted = self.service.read_text(row)  # extracted once, at upload: never parsed here
            except Exception as exc:  # noqa: BLE001 - an unreadable file is a notice, not a failed turn
                notices.append(f"{row['name']} could not be read ({getattr(exc, 'message', exc)})")
                continue
            if extracted.status == NOT_EXTRACTED:
                notices.append(f"{row['name']}: text not extracted ({extracted.note})")
                blocks.append(
                    f"--- attached file: {row['name']} ({row['mime']}): text not extracted ({extracted.note}) ---"
                )
                used["inlined"].append(row["name"])
                continue
            text = extracted.text.strip()
            if not text:
                text = "(no extractable text)"
            if len(text) > left:
                text = text[:left] + f"\n[... cut: the attachment budget of {self.budget} characters is used up]"
                used["truncated"].append(row["name"])
                left = 0
            else:
                left -= len(text)
            used["inlined"].append(row["name"])
            blocks.append(f"--- attached file: {row['name']} ({row['mime']}) ---\n{text}")
        if used["omitted"]:
            blocks.append("Also attached but omitted (over the attachment budget): " + ", ".join(used["omitted"]))
            notices.append(
                f"Omitted for length (attachment budget {self.budget} characters): " + ", ".join(used["omitted"])
            )
        if used["images_not_sent"]:
            notices.append(
                "Not sent: this model does not accept images ("
                + ", ".join(used["images_not_sent"])
                + "). Pick a vision model or mark it with vision = true in its provider settings."
            )
        if missing:
            notices.append(f"{len(missing)} attachment(s) were deleted before the reply started")
        main = Injection(
            self.name,
            event=Event(ATTACHMENTS, {"data": [chip(row) for row in rows]}),
            text=untrusted_block("attachments", "\n\n".join(blocks)) if blocks else "",
            parts=parts,
            metadata={
                "attachments_used": {k: v for k, v in used.items() if v},
                **({"context_notices": notices} if notices else {}),
            },
        )
        return [main] + [Injection(self.name, notice=note) for note in notices]

    def _images_ok(self, request: ContextRequest) -> bool:
        try:
            candidates = self.resolve(request.model)
        except Exception:  # noqa: BLE001 - the turn itself reports an unknown model
            return False
        return bool(candidates) and self.accepts(candidates[0])
