"""Deleting a session removes everything it left: messages, runs, approvals, images and its workspace."""

from __future__ import annotations

import os

from odysseus.tools.registry import safe_segment


def test_delete_session_removes_its_records_files_and_workspace(app, client):
    store = app.extensions["odysseus.store"]
    owner = app.config["LOCAL_OWNER"]
    keep = client.post("/api/sessions", json={"title": "keep"}).get_json()["id"]
    doomed = client.post("/api/sessions", json={"title": "doomed"}).get_json()["id"]
    data_dir = app.config["DATA_DIR"]
    images = os.path.join(data_dir, "images")
    os.makedirs(images, exist_ok=True)
    for session_id, name in ((doomed, "img_" + "D" * 22 + ".png"), (keep, "img_" + "K" * 22 + ".png")):
        store.messages.add(owner, session_id, "user", "hello")
        store.approvals.create(
            approval_id=f"apr_{session_id}",
            owner=owner,
            session_id=session_id,
            run_id="run_x",
            call={"id": "c", "name": "shell", "arguments": {}},
            call_hash="h",
            state={},
            ttl=600,
        )
        with open(os.path.join(images, name), "wb") as fh:
            fh.write(b"png")
        store.images.add(name, owner, session_id, "image/png", 3)
        os.makedirs(os.path.join(data_dir, "workspaces", safe_segment(owner), safe_segment(session_id)))

    assert client.delete(f"/api/sessions/{doomed}").get_json() == {"deleted": True}

    assert client.get(f"/api/sessions/{doomed}").status_code == 404
    assert store.approvals.get(f"apr_{doomed}") is None
    assert store.approvals.get(f"apr_{keep}") is not None
    assert sorted(os.listdir(images)) == ["img_" + "K" * 22 + ".png"]
    workspaces = os.listdir(os.path.join(data_dir, "workspaces", safe_segment(owner)))
    assert workspaces == [safe_segment(keep)]
    assert [m["content"] for m in client.get(f"/api/sessions/{keep}/messages").get_json()["messages"]] == ["hello"]
