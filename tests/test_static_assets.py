"""Static files (odysseus/static_assets.py): fingerprinted URLs, cache headers, gzip, the import map,
and hostile paths. The browser's view of the same (a reload with no request): tests/browser/test_page_load.py."""

from __future__ import annotations

import gzip
import json
import os
import re

import pytest

from odysseus.static_assets import IMMUTABLE, REVALIDATE, AssetManifest


def _page_urls(client):
    html = client.get("/").get_data(as_text=True)
    urls = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
    imports = json.loads(re.search(r'<script type="importmap">(.*?)</script>', html, re.S).group(1))["imports"]
    return html, urls, imports


def test_the_page_references_fingerprinted_urls_and_maps_every_module(client):
    html, urls, imports = _page_urls(client)
    assert urls and all(re.search(r"\.[0-9a-f]{12}\.(js|css)$", u) for u in urls), urls
    assert not [u for u in urls if "katex" in u or "mermaid" in u]  # loaded on first use only
    assert imports["/static/js/chat.js"] in urls
    for name in ("render.js", "markdown.js", "lazy_assets.js", "compare.js"):
        assert re.fullmatch(rf"/static/js/{name[:-3]}\.[0-9a-f]{{12}}\.js", imports[f"/static/js/{name}"])
    # Every module chat.js imports, directly or not, is preloaded by its fingerprinted URL.
    preloads = re.findall(r'<link rel="modulepreload" href="([^"]+)">', html)
    for name in ("render.js", "markdown.js", "math.js", "lazy_assets.js", "compare.js", "api.js"):
        assert imports[f"/static/js/{name}"] in preloads, name
    assert imports["/static/js/chat.js"] not in preloads and imports["/static/js/auth.js"] not in preloads
    # The map comes before any module script (a module loaded before it would ignore it).
    assert html.index('type="importmap"') < html.index('type="module"')


def test_fingerprinted_file_is_immutable_and_gzipped(client):
    _, _, imports = _page_urls(client)
    url = imports["/static/js/chat.js"]
    plain = client.get("/static/js/chat.js", headers={"Accept-Encoding": "identity"})
    got = client.get(url, headers={"Accept-Encoding": "gzip, deflate, br"})
    assert got.status_code == 200
    assert got.headers["Cache-Control"] == IMMUTABLE
    assert got.headers["Content-Encoding"] == "gzip"
    assert got.headers["Content-Type"].startswith("text/javascript")
    assert "Accept-Encoding" in got.headers["Vary"]
    assert gzip.decompress(got.data) == plain.data
    assert len(got.data) < len(plain.data) / 2
    # Without gzip in Accept-Encoding: the plain bytes, still immutable.
    raw = client.get(url, headers={"Accept-Encoding": "identity"})
    assert raw.data == plain.data and "Content-Encoding" not in raw.headers
    assert raw.headers["Cache-Control"] == IMMUTABLE


def test_plain_url_still_works_and_revalidates(client):
    got = client.get("/static/js/chat.js")
    assert got.status_code == 200 and got.headers["Cache-Control"] == REVALIDATE
    again = client.get("/static/js/chat.js", headers={"If-None-Match": got.headers["ETag"]})
    assert again.status_code == 304 and again.data == b""


def test_a_stale_fingerprint_gets_the_current_file_never_cached_for_good(client):
    got = client.get("/static/js/chat.000000000000.js")
    assert got.status_code == 200
    assert got.headers["Cache-Control"] == REVALIDATE
    assert got.data == client.get("/static/js/chat.js").data


@pytest.mark.parametrize(
    "path",
    [
        "/static/../setup.py",
        "/static/..%2fsetup.py",
        "/static/%2e%2e/setup.py",
        "/static/js/missing.js",
        "/static/js/missing.0123456789ab.js",
        "/static/js/../../setup.0123456789ab.py",
        "/static/js",
        "/static/js/chat.js%00",
    ],
)
def test_hostile_paths_are_404(client, path):
    assert client.get(path).status_code == 404


def test_style_sheet_urls_are_rewritten_to_fingerprinted_fonts(client):
    _, _, imports = _page_urls(client)
    url = imports["/static/vendor/katex/katex.min.css"]
    css = gzip.decompress(client.get(url, headers={"Accept-Encoding": "gzip"}).data).decode()
    fonts = re.findall(r"url\(([^)]+)\)", css)
    assert fonts and all(re.fullmatch(r"fonts/KaTeX_[\w-]+\.[0-9a-f]{12}\.(woff2|woff|ttf)", f) for f in fonts), fonts[
        :3
    ]
    font = client.get(url.rsplit("/", 1)[0] + "/" + fonts[0])
    assert font.status_code == 200 and font.headers["Cache-Control"] == IMMUTABLE
    assert "Content-Encoding" not in font.headers  # already compressed formats are sent as they are


def test_the_auth_pages_use_fingerprinted_urls(tmp_path):
    from odysseus.composition import create_app

    app = create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "password"})
    html = app.test_client().get("/setup").get_data(as_text=True)  # no account yet: the setup page
    assert re.search(r'src="/static/js/auth\.[0-9a-f]{12}\.js"', html), html


def test_fingerprint_follows_the_content(tmp_path):
    (tmp_path / "js").mkdir()
    (tmp_path / "js" / "a.js").write_text("export const a = 1;\n")
    (tmp_path / "font.woff2").write_bytes(b"\x00font")
    (tmp_path / "s.css").write_text(
        "@font-face{src:url(font.woff2)} .x{background:url(data:image/png;base64,AA)} .y{background:url(/abs.png)}"
    )
    assets = AssetManifest(str(tmp_path))
    first = assets.url("js/a.js")
    assert re.fullmatch(r"/static/js/a\.[0-9a-f]{12}\.js", first)
    (tmp_path / "js" / "a.js").write_text("export const a = 2;\n")
    os.utime(tmp_path / "js" / "a.js", ns=(1, 1))
    assert assets.url("js/a.js") != first
    css = assets.content(str(tmp_path / "s.css")).decode()
    assert re.search(r"url\(font\.[0-9a-f]{12}\.woff2\)", css)
    assert "url(data:image/png;base64,AA)" in css and "url(/abs.png)" in css  # left alone
    assert assets.url("missing.js") == "/static/missing.js"
    assert set(assets.import_map()["imports"]) == {"/static/js/a.js", "/static/s.css"}


def test_module_preloads_follow_static_imports_and_their_changes(tmp_path):
    js = tmp_path / "js"
    js.mkdir()
    (js / "main.js").write_text(
        'import { a } from "./a.js";\nexport { b } from "./sub/b.js";\nconst c = import("./c.js");\n'
    )
    (js / "a.js").write_text('import "./a.js";\nimport x from "../../outside.js";\nexport const a = 1;\n')
    (js / "sub").mkdir()
    (js / "sub" / "b.js").write_text('import { a } from "../a.js";\nexport const b = a;\n')
    (js / "c.js").write_text("export const c = 1;\n")
    assets = AssetManifest(str(tmp_path))
    urls = assets.module_preloads("js/main.js")
    assert [re.sub(r"\.[0-9a-f]{12}\.js$", ".js", u) for u in urls] == ["/static/js/a.js", "/static/js/sub/b.js"]
    (js / "c.js").write_text("export const c = 2;\n")  # a dynamic import is never preloaded
    (js / "a.js").write_text('import "./c.js";\nexport const a = 1;\n')
    os.utime(js / "a.js", ns=(2, 2))
    urls = assets.module_preloads("js/main.js")
    assert [re.sub(r"\.[0-9a-f]{12}\.js$", ".js", u) for u in urls] == [
        "/static/js/a.js",
        "/static/js/sub/b.js",
        "/static/js/c.js",
    ]
