"""One user's file cannot starve the others (issue 38, item 1).

A 31 KB PDF whose page inflates to 10 MB of text operators took a minute of CPU to read, in gevent's
shared thread pool, again for every turn that attached it: eleven such turns left another user's
sign-in (whose password check ran in the same pool) without an answer for two minutes. Now the text
is extracted once, at upload, in a child process with CPU, memory and time limits; a file past a
limit is kept and marked; attaching reads the stored result; passwords have their own threads.
"""

from __future__ import annotations

import io
import threading
import time

import pytest
import requests
from liveserver import LiveServer
from sample_files import pdf, pdf_bomb
from sseclient import post_chat

from odysseus.context.extract import ExtractLimits, extract

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery"
LIMITS = ExtractLimits(cpu_seconds=1, memory_bytes=512 * 1024 * 1024, timeout=5.0, max_chars=1000)


def test_the_child_reads_a_pdf_and_stops_at_each_limit(tmp_path):
    fine = tmp_path / "fine.pdf"
    fine.write_bytes(pdf("first page", "second page"))
    assert extract("pdf", str(fine), LIMITS).text == "first page\n\nsecond page"
    bomb = tmp_path / "bomb.pdf"
    bomb.write_bytes(pdf_bomb())
    started = time.monotonic()
    refused = extract("pdf", str(bomb), LIMITS)
    assert refused.status == "not_extracted" and "CPU" in refused.note, refused
    assert time.monotonic() - started < 4.0  # ended by its CPU limit, not read for seconds
    long_text = tmp_path / "long.pdf"
    long_text.write_bytes(pdf(*["word " * 100] * 5))
    cut = extract("pdf", str(long_text), LIMITS)
    assert cut.status == "cut" and len(cut.text) == 1000
    slow = extract("pdf", str(bomb), ExtractLimits(60, 512 * 1024 * 1024, timeout=1.0, max_chars=1000))
    assert slow.status == "not_extracted" and "longer than 1 s" in slow.note


def test_a_bomb_is_read_once_and_another_user_signs_in_at_once(tmp_path):
    server = LiveServer(
        str(tmp_path / "app"),
        {"ODYSSEUS_AUTH": "password", "ODYSSEUS_EXTRACT_CPU_SECONDS": "1", "ODYSSEUS_EXTRACT_TIMEOUT": "5"},
    ).start()
    try:
        alice = requests.Session()
        made = alice.post(f"{server.url}/api/auth/setup", json={"username": "alice", "password": PASSWORD})
        csrf = {"X-Odysseus-CSRF": made.json()["csrf_token"]}
        assert alice.post(
            f"{server.url}/api/auth/users", json={"username": "bob", "password": PASSWORD}, headers=csrf
        ).status_code in (200, 201)
        started = time.monotonic()
        uploaded = alice.post(
            f"{server.url}/api/upload", files={"files": ("bomb.pdf", io.BytesIO(pdf_bomb()))}, headers=csrf
        )
        assert uploaded.status_code in (200, 201), uploaded.text
        record = uploaded.json()["files"][0]
        assert time.monotonic() - started < 6.0
        assert record["text_status"] == "not_extracted" and "CPU" in record["text_note"]  # kept, and marked

        # eleven turns attach it at once while bob signs in: nothing parses it again
        answers: list = []
        cookies = {"Cookie": "; ".join(f"{k}={v}" for k, v in alice.cookies.items()), **csrf}
        turns = [
            threading.Thread(
                target=lambda n=n: answers.append(
                    post_chat(server.url, f"what is in it? {n}", headers=cookies, attachments=[record["id"]]).events()
                )
            )
            for n in range(11)
        ]
        for turn in turns:
            turn.start()
        signed_in = time.monotonic()
        bob = requests.post(f"{server.url}/api/auth/login", json={"username": "bob", "password": PASSWORD}, timeout=30)
        took = time.monotonic() - signed_in
        assert bob.status_code == 200 and took < 1.0, took
        for turn in turns:
            turn.join(60)
        assert len(answers) == 11
        for frames in answers:
            notices = [
                f["data"] for f in frames if isinstance(f.get("data"), dict) and f["data"].get("type") == "notice"
            ]
            assert any("text not extracted" in n["message"] for n in notices), frames[:5]
            assert frames[-1]["data"] == "[DONE]"
    finally:
        server.stop()
