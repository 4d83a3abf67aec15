"""``generate_image`` through an OpenAI-compatible ``/images/generations`` endpoint.

The image comes back as base64 (or a URL we download from the configured endpoint's
answer); it is handed to ``ctx.save_image``, which stores it and returns our own URL,
so the browser never loads images from the provider and the owner check applies.

A URL in the answer is followed only on the endpoint's own origin or through the web tools'
SSRF guard (``tools/web.py``: every hop must reach a public address, unless the admin allowed a
network), and every download is read at most ``MAX_IMAGE_BYTES`` + 1 bytes: the answer of an image
service cannot make the server fetch its own private network, nor fill its memory.
"""

from __future__ import annotations

import base64
from typing import List
from urllib.parse import urlsplit

import requests

from ..events import GENERATED_IMAGE, Event
from ..llm.text_repair import repair_value
from .registry import Tool, ToolContext, ToolError, ToolResult

MAX_IMAGE_BYTES = 20 * 1024 * 1024
SIZES = ("256x256", "512x512", "1024x1024", "1792x1024", "1024x1792")


def _mime(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    raise ToolError("the image endpoint returned data that is not a PNG, JPEG, WebP or GIF image")


def generate_image(args: dict, ctx: ToolContext) -> ToolResult:
    """Ask the images endpoint for one image, store it, publish ``generated_image``."""
    prompt = args.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ToolError("prompt must be a non-empty string")
    if ctx.save_image is None:
        raise ToolError("images cannot be stored on this server")
    config = ctx.config
    base = str(config.get("IMAGES_BASE_URL") or "").rstrip("/")
    body = {"prompt": prompt.strip()[:4000], "n": 1, "response_format": "b64_json"}
    if config.get("IMAGES_MODEL"):
        body["model"] = config["IMAGES_MODEL"]
    if args.get("size") in SIZES:
        body["size"] = args["size"]
    headers = {"Content-Type": "application/json"}
    if config.get("IMAGES_API_KEY"):
        headers["Authorization"] = f"Bearer {config['IMAGES_API_KEY']}"
    timeout = float(config.get("IMAGES_TIMEOUT", 120.0))
    session = requests.Session()
    unregister = ctx.cancel.on_cancel(session.close)
    try:
        response = session.post(base + "/images/generations", json=body, headers=headers, timeout=timeout)
        if response.status_code != 200:
            raise ToolError(f"the image endpoint answered HTTP {response.status_code}")
        try:
            item = repair_value((response.json().get("data") or [None])[0] or {})
        except (ValueError, RecursionError, AttributeError, IndexError, TypeError):
            raise ToolError("the image endpoint did not answer JSON") from None
        if item.get("b64_json"):
            data = base64.b64decode(item["b64_json"])
        elif item.get("url"):
            data = _download(str(item["url"]), base, session, timeout, ctx)
        else:
            raise ToolError("the image endpoint returned no image")
    except requests.RequestException as exc:
        raise ToolError(f"the image endpoint could not be reached ({type(exc).__name__})") from None
    finally:
        unregister()
        session.close()
    if len(data) > MAX_IMAGE_BYTES:
        raise ToolError("the generated image is too large")
    url = ctx.save_image(data, _mime(data))
    revised = item.get("revised_prompt")
    event = {"url": url, "prompt": prompt.strip()[:1000]}
    if revised:
        event["revised_prompt"] = revised
    return ToolResult(
        f"Image generated and shown to the user at {url}.", events=[Event(GENERATED_IMAGE, event)], meta={"url": url}
    )


def _origin(url: str) -> tuple:
    parts = urlsplit(url)
    return (parts.scheme, (parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80))


def _download(url: str, base: str, session: requests.Session, timeout: float, ctx: ToolContext) -> bytes:
    """The image at ``url``, capped while reading: from the endpoint itself, or through the SSRF guard."""
    if _origin(url) == _origin(base):
        response = session.get(url, timeout=timeout, stream=True, allow_redirects=False)
        try:
            if response.status_code != 200:
                raise ToolError(f"downloading the image failed (HTTP {response.status_code})")
            data = b""
            for chunk in response.iter_content(chunk_size=65536):
                data += chunk
                if len(data) > MAX_IMAGE_BYTES:
                    raise ToolError("the generated image is too large")
            return data
        finally:
            response.close()
    from .web import fetch  # the guarded fetch of fetch_url: public addresses only, each redirect checked

    _, response, data = fetch(url, ctx, limit=MAX_IMAGE_BYTES + 1, accept="image/*")
    if response.status_code != 200:
        raise ToolError(f"downloading the image failed (HTTP {response.status_code})")
    if len(data) > MAX_IMAGE_BYTES:
        raise ToolError("the generated image is too large")
    return bytes(data)


def image_tools(config: dict) -> List[Tool]:
    """``generate_image`` when ``IMAGES_BASE_URL`` is configured, else nothing."""
    if not config.get("IMAGES_BASE_URL"):
        return []
    return [
        Tool(
            "generate_image",
            "Generate an image from a text prompt and show it to the user.",
            {
                "type": "object",
                "properties": {"prompt": {"type": "string"}, "size": {"type": "string", "enum": list(SIZES)}},
                "required": ["prompt"],
            },
            generate_image,
            timeout=float(config.get("IMAGES_TIMEOUT", 120.0)) + 5,
            describe=lambda a: str(a.get("prompt", "")),
        )
    ]
