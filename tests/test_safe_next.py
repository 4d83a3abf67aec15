"""Login ``next=``: only ever a same-site path, under every normalisation a browser or proxy applies."""

from __future__ import annotations

from urllib.parse import quote, urljoin, urlsplit

import pytest
from apphelpers import close_app
from test_accounts import setup_admin

from odysseus import create_app
from odysseus.routes.safe_next import local_target

#: Known open-redirect payloads, as they appear in the query string (already URL-encoded where shown).
OPEN_REDIRECTS = [
    "/%09/evil.example/phish",
    "%09//evil.example",
    "//evil.example",
    "///evil.example",
    "////evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "/%5Cevil.example",
    "%5C%5Cevil.example",
    "/%2F/evil.example",
    "/%2Fevil.example",
    "%2F%2Fevil.example",
    "/%252F%252Fevil.example",
    "/%25252F%25252Fevil.example",
    "https://evil.example",
    "http:evil.example",
    "HTTPS:%2F%2Fevil.example",
    "javascript:alert(1)",
    "JaVaScRiPt%3Aalert(1)",
    "data:text/html,<script>alert(1)</script>",
    "evil.example",
    "%20//evil.example",
    "/%00/evil.example",
    "/%1F/evil.example",
    "/%7F/evil.example",
    "/%C2%85/evil.example",
    "/%09%09/evil.example",
    "/%5C%09/evil.example",
    "%09/%09/evil.example",
    "/" + "a" * 3000,
]
LINE_BREAKS = ["/%0D/evil.example", "/%0D%0ASet-Cookie:%20x=1", "/a%0Ab", "/%0A/evil.example", "/a%250Ab", "%0D"]
GOOD = ["/", "/chat", "/?session=s_abc", "/a/b?c=d&e=%2F%2Fnot-a-host#frag", "/path%20with%20spaces", "/%E2%9C%93"]


def _stays_here(location: str) -> bool:
    """What a browser would do with Location: resolve it against our origin, ignoring tabs/newlines."""
    cleaned = location.replace("\t", "").replace("\n", "").replace("\r", "").replace("\\", "/")
    resolved = urlsplit(urljoin("http://odysseus.local/login", cleaned))
    return resolved.scheme == "http" and resolved.netloc == "odysseus.local"


@pytest.fixture(scope="module")
def none_app(tmp_path_factory):
    """One app per module: the login redirect stores nothing, so the cases need no fresh database each."""
    application = create_app({"DATA_DIR": str(tmp_path_factory.mktemp("none")), "PROVIDERS": [], "AUTH": "none"})
    yield application
    close_app(application)


@pytest.mark.parametrize("payload", OPEN_REDIRECTS)
def test_open_redirect_payloads_fall_back_to_root(none_app, payload):
    response = none_app.test_client().get("/login?next=" + payload)
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


@pytest.fixture(scope="module")
def password_app(tmp_path_factory):
    """One app with an admin account for the module (each case reads the login page signed out)."""
    application = create_app(
        {"DATA_DIR": str(tmp_path_factory.mktemp("password")), "PROVIDERS": [], "AUTH": "password"}
    )
    setup_admin(application.test_client())
    yield application
    close_app(application)


@pytest.mark.parametrize("payload", OPEN_REDIRECTS)
def test_login_page_never_renders_a_foreign_next(password_app, payload):
    page = password_app.test_client().get("/login?next=" + payload)  # a fresh client: signed out
    assert page.status_code == 200 and b'data-next="/"' in page.data


@pytest.mark.parametrize("payload", LINE_BREAKS)
def test_line_breaks_in_next_are_400(none_app, payload):
    response = none_app.test_client().get("/login?next=" + payload)
    assert response.status_code == 400
    assert "line break" in response.get_json()["error"]


@pytest.mark.parametrize("target", GOOD)
def test_same_site_paths_are_kept(none_app, target):
    response = none_app.test_client().get("/login?next=" + quote(target, safe=""))
    assert response.status_code == 302
    assert response.headers["Location"] == target or response.headers["Location"] == quote(target, safe="/?&=#%")
    assert _stays_here(response.headers["Location"])


@pytest.mark.slow  # fuzzing: 15**4 combinations, about 5 s
def test_every_accepted_target_stays_on_the_site():
    """Fuzz the checker with combinations of the dangerous characters."""
    import itertools

    alphabet = ["/", "\\", "\t", "%09", "%2F", "%5C", "%25", ":", "evil.example", "a", " ", "%00", "@", "?", "#"]
    for parts in itertools.product(alphabet, repeat=4):
        raw = "".join(parts)
        try:
            target = local_target(raw)
        except Exception as exc:  # noqa: BLE001 - line breaks cannot occur in this alphabet
            raise AssertionError(raw) from exc
        for form in (target, *(_unquoted(target))):
            assert _stays_here(form), (raw, target)


def _unquoted(text: str):
    from urllib.parse import unquote

    for _ in range(4):
        text = unquote(text)
        yield text
