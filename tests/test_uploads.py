"""POST/GET/DELETE /api/upload: content sniffing, limits and refusals (nothing stored), dedupe, storage by id."""

from __future__ import annotations

import io
import os

import pytest
import sample_files as sf

from odysseus import create_app

PASSWORD = "correct horse battery"


@pytest.fixture
def app(tmp_path):
    application = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "none",
            "UPLOAD_MAX_BYTES": 64 * 1024,
            "UPLOAD_MAX_FILES": 3,
            "UPLOAD_QUOTA_BYTES": 200 * 1024,
        }
    )
    yield application
    application.extensions["odysseus.runs"].close()


def send(client, *files, **extra):
    """POST the ``files`` field: each file a (name, bytes) pair."""
    data = {"files": [(io.BytesIO(body), name) for name, body in files], **extra}
    return client.post("/api/upload", data=data, content_type="multipart/form-data")


def stored_files(app):
    """The uploads' stored bytes (their extracted text, ``<id>.txt`` beside them, is not an upload)."""
    folder = os.path.join(app.config["DATA_DIR"], "uploads")
    return sorted(name for name in os.listdir(folder) if not name.endswith(".txt")) if os.path.isdir(folder) else []


def test_upload_records_sniffed_types_sizes_and_stores_by_id(app, client):
    response = send(
        client, ("notes.md", b"# Title\n\nSome *notes*."), ("pic.png", sf.png(3, 2)), ("photo.jpg", sf.jpeg(640, 480))
    )
    assert response.status_code == 200, response.get_json()
    files = response.get_json()["files"]
    assert [f["name"] for f in files] == ["notes.md", "pic.png", "photo.jpg"]
    assert [f["mime"] for f in files] == ["text/markdown", "image/png", "image/jpeg"]
    assert (files[1]["width"], files[1]["height"]) == (3, 2) and (files[2]["width"], files[2]["height"]) == (640, 480)
    assert "width" not in files[0] and all(f["is_duplicate"] is False for f in files)
    assert all(f["id"].startswith("up_") and len(f["sha256"]) == 64 and f["uploaded_at"] > 0 for f in files)
    assert files[0]["size"] == len(b"# Title\n\nSome *notes*.")
    assert stored_files(app) == sorted(f["id"] for f in files)  # by id, never the client's name
    listed = client.get("/api/upload").get_json()["files"]
    assert {f["id"] for f in listed} == {f["id"] for f in files}


@pytest.mark.parametrize(
    "name,body,mime,size",
    [
        ("anim.gif", sf.gif(5, 7), "image/gif", (5, 7)),
        ("x.webp", sf.webp(300, 200), "image/webp", (300, 200)),
        ("doc.pdf", sf.pdf("Hello"), "application/pdf", None),
        ("data.csv", b"a,b\n1,2\n", "text/csv", None),
        ("script.sh", b"#!/bin/sh\necho hi\n", "text/x-shellscript", None),  # scripts are text: read, never run
        ("no-extension", "Grüße, naïve café".encode("utf-8"), "text/plain", None),
        ("utf16.txt", "hello".encode("utf-16"), "text/plain", None),
        ("fake.png", b"just text, whatever the name says", "text/plain", None),  # content decides, not the name
    ],
)
def test_types_are_decided_by_content(client, name, body, mime, size):
    record = send(client, (name, body)).get_json()["files"][0]
    assert record["mime"] == mime
    assert ((record.get("width"), record.get("height")) if size else None) == size


@pytest.mark.parametrize(
    "name,body,status,words",
    [
        ("empty.txt", b"", 400, "empty"),
        ("a.out", sf.ELF, 400, "executables are not accepted (an ELF"),
        ("setup.exe", sf.PE, 400, "Windows executable"),
        ("tool", sf.MACHO, 400, "Mach-O"),
        ("archive.zip", sf.ZIP, 400, "unsupported file type"),
        ("nul.txt", b"hello\x00world", 400, "unsupported file type"),
        ("bad.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 4, 400, "damaged"),
        ("big.txt", b"a" * (64 * 1024 + 1), 413, "larger than the limit of 65536 bytes"),
    ],
)
def test_refusals_are_clear_and_store_nothing(app, client, name, body, status, words):
    response = send(client, ("fine.txt", b"a fine file"), (name, body))
    assert response.status_code == status
    assert words in response.get_json()["error"]
    assert stored_files(app) == [] and client.get("/api/upload").get_json()["files"] == []


def test_hostile_names_are_display_names_only(app, client):
    files = send(
        client, ("../../etc/passwd", b"one"), ("..\\..\\win.ini", b"two"), ("a\x00b\x1b\t.txt", b"three")
    ).get_json()["files"]
    files += send(client, ("....", b"four")).get_json()["files"]
    assert [f["name"] for f in files] == ["passwd", "win.ini", "ab.txt", "upload"]
    assert stored_files(app) == sorted(f["id"] for f in files)
    long_name = send(client, ("x" * 5000 + ".txt", b"five")).get_json()["files"][0]["name"]
    assert len(long_name) <= 200 and long_name.endswith(".txt")


def test_too_many_files_no_files_and_a_huge_body(app, client):
    response = send(client, *[(f"{i}.txt", f"file {i}".encode()) for i in range(4)])
    assert response.status_code == 413 and "at most 3" in response.get_json()["error"]
    response = client.post("/api/upload", data={"other": "x"}, content_type="multipart/form-data")
    assert response.status_code == 400 and "files" in response.get_json()["error"]
    response = client.post("/api/upload", json={"files": ["x"]})
    assert response.status_code == 400
    huge = send(client, ("huge.txt", b"a" * (4 * 64 * 1024 + 2 * 1024 * 1024)))
    assert huge.status_code == 413 and "too large" in huge.get_json()["error"]
    assert stored_files(app) == []


def test_same_bytes_give_the_existing_record_and_do_not_count_twice(app, client):
    first = send(client, ("a.txt", b"same bytes")).get_json()["files"][0]
    again = send(client, ("renamed.txt", b"same bytes"), ("other.txt", b"other bytes")).get_json()["files"]
    assert again[0]["id"] == first["id"] and again[0]["is_duplicate"] is True and again[0]["name"] == "a.txt"
    assert again[1]["is_duplicate"] is False
    both = send(client, ("x.txt", b"twice in one request"), ("y.txt", b"twice in one request")).get_json()["files"]
    assert both[0]["id"] == both[1]["id"] and both[1]["is_duplicate"] is True
    assert len(stored_files(app)) == 3


def test_quota_per_user(app, client):
    for i in range(3):
        assert send(client, (f"{i}.txt", bytes([65 + i]) * 60 * 1024)).status_code == 200
    response = send(client, ("3.txt", b"D" * 30 * 1024))
    assert response.status_code == 413 and "quota" in response.get_json()["error"]
    assert send(client, ("dup.txt", b"A" * 60 * 1024)).get_json()["files"][0]["is_duplicate"] is True  # no new bytes
    first = client.get("/api/upload").get_json()["files"][-1]["id"]
    assert client.delete(f"/api/upload/{first}").status_code == 200
    assert send(client, ("3.txt", b"D" * 30 * 1024)).status_code == 200


def test_get_content_and_delete(app, client):
    text, image = send(client, ("n.txt", b"<script>alert(1)</script>"), ("p.png", sf.png())).get_json()["files"]
    record = client.get(f"/api/upload/{text['id']}").get_json()
    assert record["id"] == text["id"] and record["index_status"] in ("pending", "indexing", "indexed")
    body = client.get(f"/api/upload/{text['id']}/content")
    assert body.data == b"<script>alert(1)</script>" and body.mimetype == "text/plain"
    assert body.headers["X-Content-Type-Options"] == "nosniff" and "attachment" in body.headers["Content-Disposition"]
    assert "sandbox" in body.headers["Content-Security-Policy"]
    picture = client.get(f"/api/upload/{image['id']}/content")
    assert picture.mimetype == "image/png" and picture.data == sf.png()
    assert client.get(f"/api/upload/{image['id']}").get_json()["index_status"] == "none"
    assert client.delete(f"/api/upload/{text['id']}").get_json() == {"deleted": True, "id": text["id"]}
    assert client.get(f"/api/upload/{text['id']}").status_code == 404
    assert client.delete(f"/api/upload/{text['id']}").status_code == 404
    assert stored_files(app) == [image["id"]]
    for bad in ("../../etc/passwd", "up_..", "nope", "up_" + "a" * 100):
        assert client.get(f"/api/upload/{bad}").status_code == 404


@pytest.mark.slow  # measured 1.1 s: every upload route twice
def test_other_users_get_404_for_every_upload_route(tmp_path):
    app = create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "password"})
    try:
        accounts = app.extensions["odysseus.accounts"]
        accounts.create_user("alice", PASSWORD)
        accounts.create_user("bob", PASSWORD)
        alice, bob = app.test_client(), app.test_client()
        tokens = {}
        for name, client in (("alice", alice), ("bob", bob)):
            login = client.post("/api/auth/login", json={"username": name, "password": PASSWORD})
            tokens[name] = login.get_json()["csrf_token"]
        headers = {"X-Odysseus-CSRF": tokens["alice"]}
        mine = alice.post(
            "/api/upload",
            data={"files": [(io.BytesIO(b"alice secret"), "s.txt")]},
            content_type="multipart/form-data",
            headers=headers,
        ).get_json()["files"][0]
        bob_headers = {"X-Odysseus-CSRF": tokens["bob"]}
        for method, path in (
            ("GET", f"/api/upload/{mine['id']}"),
            ("GET", f"/api/upload/{mine['id']}/content"),
            ("DELETE", f"/api/upload/{mine['id']}"),
        ):
            response = bob.open(path, method=method, headers=bob_headers)
            assert response.status_code == 404 and b"alice secret" not in response.data
        assert bob.get("/api/upload").get_json()["files"] == []
        # bob uploading the same bytes gets his own record, not a duplicate of alice's
        his = bob.post(
            "/api/upload",
            data={"files": [(io.BytesIO(b"alice secret"), "s.txt")]},
            content_type="multipart/form-data",
            headers=bob_headers,
        ).get_json()["files"][0]
        assert his["id"] != mine["id"] and his["is_duplicate"] is False
        refused = bob.post("/api/chat_stream", json={"message": "hi", "attachments": [mine["id"]]}, headers=bob_headers)
        assert refused.status_code == 404 and bob.get("/api/sessions").get_json()["sessions"] == []
        assert alice.get(f"/api/upload/{mine['id']}").status_code == 200
        assert app.test_client().get(f"/api/upload/{mine['id']}").status_code == 401
    finally:
        app.extensions["odysseus.runs"].close()
