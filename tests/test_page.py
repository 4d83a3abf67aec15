"""GET / serves the page shell; its scripts and styles are served as static files."""

import re


def test_index_serves_the_page(client):
    response = client.get("/")
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    assert response.headers["Cache-Control"] == "no-cache"
    html = response.get_data(as_text=True)
    assert re.search(r'<script type="module" src="/static/js/chat\.[0-9a-f]{12}\.js">', html)  # fingerprinted
    for tag in ('id="composer"', 'id="session-list"', 'id="model-picker"', 'name="mode" value="agent"'):
        assert tag in html


def test_every_local_asset_of_the_page_exists(client):
    html = client.get("/").get_data(as_text=True)
    assets = re.findall(r'(?:src|href)="(/static/(?:js|css)/[^"]+)"', html)
    assert len(assets) >= 3
    for path in assets:
        assert client.get(path).status_code == 200, path


def test_page_modules_import_only_existing_modules(client):
    seen, queue = set(), ["/static/js/chat.js"]
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        response = client.get(path)
        assert response.status_code == 200, path
        for name in re.findall(r'from "\./([\w.]+)"', response.get_data(as_text=True)):
            queue.append("/static/js/" + name)
    assert "/static/js/sse_reader.js" in seen and "/static/js/exhibits.js" in seen
