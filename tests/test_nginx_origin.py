"""Browser writes through a real nginx on a non-default port (issue 38, item 7).

A browser sends ``Origin: http://host:PORT`` with every POST. nginx's ``proxy_set_header Host $host``
drops the port, so the origin check compared ``host:PORT`` with ``host`` and refused every write with
a 403. docs/deploy.md's block now forwards ``$http_host``; these tests run that very block (read from
the document) in a real nginx, and show that the old line fails with a message that says why.
"""

from __future__ import annotations

import pytest
import requests
from liveserver import LiveServer
from nginxserver import Nginx

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    live = LiveServer(str(tmp_path_factory.mktemp("nginx-app")), {"ODYSSEUS_AUTH": "password"}).start()
    yield live
    live.stop()


def _proxy(tmp_path, upstream, host_header=None):
    return Nginx(str(tmp_path / "nginx"), upstream.port, host_header).start()


def test_documented_block_lets_browser_writes_through_on_another_port(tmp_path, upstream):
    proxy = _proxy(tmp_path, upstream)
    try:
        browser = requests.Session()
        origin = {"Origin": proxy.url}  # what a browser on http://localhost:PORT sends with a POST
        made = browser.post(
            f"{proxy.url}/api/auth/setup", json={"username": "alice", "password": PASSWORD}, headers=origin
        )
        assert made.status_code in (200, 201), made.text
        # a cookie-authenticated write carrying only the Origin header (no CSRF header): same origin, accepted
        saved = browser.patch(f"{proxy.url}/api/user/settings", json={"system_prompt": "be brief"}, headers=origin)
        assert saved.status_code == 200, saved.text
        assert browser.get(f"{proxy.url}/api/user/settings").json()["settings"]["system_prompt"] == "be brief"
        # still a CSRF check: another origin (another port of the same host is another origin) is refused
        other = {"Origin": f"http://localhost:{proxy.port + 1}"}
        refused = browser.patch(f"{proxy.url}/api/user/settings", json={"system_prompt": "x"}, headers=other)
        assert refused.status_code == 403
        assert browser.get(f"{proxy.url}/api/user/settings").json()["settings"]["system_prompt"] == "be brief"
    finally:
        proxy.stop()


def test_a_proxy_that_drops_the_port_is_refused_with_the_reason(tmp_path, upstream):
    proxy = _proxy(tmp_path, upstream, host_header="$host")  # the line docs/deploy.md used to have
    try:
        answer = requests.post(
            f"{proxy.url}/api/auth/login",
            json={"username": "nobody", "password": PASSWORD},
            headers={"Origin": proxy.url},
        )
        assert answer.status_code == 403
        message = answer.json()["error"]
        assert f"localhost:{proxy.port}" in message and "$http_host" in message, message
    finally:
        proxy.stop()
