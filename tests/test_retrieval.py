"""Retrieval over the user's files: chunking, FTS5/BM25 ranking, the threshold, ``rag_sources`` before the
first delta, metadata, deletion, restart recovery and the embeddings path against a local /v1/embeddings server."""

from __future__ import annotations

import io
import json
import math
import re

import pytest
import sample_files as sf
from fakeproviders import FakeProvider, Reply, openai_text

from odysseus import create_app
from odysseus.context.chunking import chunk_text, query_terms
from odysseus.llm.base import ProviderConfig

CORPUS = {
    "volcanoes.txt": "Volcanoes erupt when magma rises through the crust. Lava flows from a volcano can travel "
    "many kilometres. The volcano Etna in Sicily erupts often.",
    "baking.md": "Sourdough bread needs a starter. Knead the dough, let it rise overnight, and bake the bread "
    "at a high temperature.",
    "finance.csv": "quarter,revenue\nQ1,12 million\nQ2,15 million\n",
    "manual.pdf": sf.pdf("The pump must be primed before first use. Prime the pump with clean water."),
}


def make_app(tmp_path, fake, **config):
    return create_app(
        {
            "DATA_DIR": str(tmp_path),
            "AUTH": "none",
            "RAG_MIN_SCORE": 0.25,
            **config,
            "PROVIDERS": [
                ProviderConfig(name="fake", kind="openai", base_url=fake.url + "/v1", models=["m"], default_model="m")
            ],
        }
    )


@pytest.fixture
def app(tmp_path, fake):
    application = make_app(tmp_path, fake)
    yield application
    application.extensions["odysseus.runs"].close()


def upload_all(app, client, files):
    data = {
        "files": [
            (io.BytesIO(body if isinstance(body, bytes) else body.encode()), name) for name, body in files.items()
        ]
    }
    records = client.post("/api/upload", data=data, content_type="multipart/form-data").get_json()["files"]
    assert app.extensions["odysseus.uploads"].indexer.wait(30)
    return {r["name"]: r["id"] for r in records}


def search(app, query):
    return app.extensions["odysseus.uploads"].indexer and _retriever(app).search("local", query)


def _retriever(app):
    sources = app.extensions["odysseus.context"].sources
    return next(s for s in sources if s.name == "retrieval").retriever


def events_of(response):
    out = []
    for line in response.get_data().decode().split("\n"):
        if line.startswith("data: {"):
            data = json.loads(line[6:])
            out.append((data.get("type") or "delta", data))
    return out


# ---------------------------------------------------------------- chunking


def test_chunks_respect_size_sentences_and_overlap():
    sentences = [f"Sentence {i} talks about topic number {i}." for i in range(80)]
    chunks = chunk_text(" ".join(sentences), size=300, overlap=80)
    assert len(chunks) > 5 and all(len(c) <= 300 for c in chunks)
    assert all(c.endswith(".") for c in chunks)  # whole sentences only
    for first, second in zip(chunks, chunks[1:], strict=False):
        assert second.split(". ")[0] + "." in first  # the next chunk starts with the previous one's tail
    joined = " ".join(chunks)
    assert all(s in joined for s in sentences)
    assert [len(c) for c in chunk_text("x" * 2500, size=1000)] == [1000, 1000, 500]
    assert chunk_text("") == [] and chunk_text("One.") == ["One."]


def test_query_terms_drop_stopwords():
    assert query_terms("What is the capital of France?") == ["capital", "france"]
    assert query_terms('"quotes" OR NEAR(x) AND *') == ["quotes", "near"]  # FTS5 syntax is just words


# ---------------------------------------------------------------- ranking


def test_bm25_ranking_on_a_small_corpus(app):
    client = app.test_client()
    ids = upload_all(app, client, CORPUS)
    statuses = {name: client.get(f"/api/upload/{i}").get_json() for name, i in ids.items()}
    assert all(s["index_status"] == "indexed" and s["chunk_count"] >= 1 for s in statuses.values())
    hits = search(app, "When does a volcano erupt?")
    assert hits[0]["name"] == "volcanoes.txt" and hits[0]["score"] >= 0.25
    assert search(app, "how do I bake sourdough bread")[0]["name"] == "baking.md"
    assert search(app, "priming the pump")[0]["name"] == "manual.pdf"  # porter stemming: priming ~ primed
    assert search(app, "revenue in Q2")[0]["name"] == "finance.csv"
    assert search(app, "quantum chromodynamics") == []
    assert search(app, "the of and") == []


def test_more_specific_chunks_rank_higher(app):
    client = app.test_client()
    upload_all(
        app,
        client,
        {
            "a.txt": "Etna is a volcano. Etna erupts. Etna is in Sicily. Etna Etna.",
            "b.txt": "A volcano can be dormant for centuries.",
            "c.txt": "Sicily is an island with lemons.",
        },
    )
    names = [h["name"] for h in search(app, "Etna volcano")]
    assert names[0] == "a.txt" and "b.txt" in names and "c.txt" not in names


# ---------------------------------------------------------------- the turn


def test_rag_sources_come_before_the_first_delta_and_stay_in_metadata(app, fake):
    client = app.test_client()
    ids = upload_all(app, client, CORPUS)
    fake.script(Reply(chunks=openai_text("Etna.")))
    response = client.post("/api/chat_stream", json={"message": "Which volcano erupts often?"})
    events = events_of(response)
    kinds = [k for k, _ in events]
    assert kinds.index("rag_sources") < kinds.index("delta")
    sources = dict(events)["rag_sources"]["data"]
    assert sources[0]["filename"] == "volcanoes.txt" and sources[0]["upload_id"] == ids["volcanoes.txt"]
    assert sources[0]["chunk"] == 0 and "Etna" in sources[0]["snippet"] and 0.25 <= sources[0]["score"] <= 1
    context = fake.posts[-1].body["messages"][-2]
    assert context["role"] == "system" and "The volcano Etna in Sicily erupts often." in context["content"]
    assert "untrusted" in context["content"].lower()
    session_id = response.headers["X-Odysseus-Session-Id"]
    reply = client.get(f"/api/sessions/{session_id}/messages").get_json()["messages"][1]
    assert reply["metadata"]["rag_sources"] == sources


def test_use_rag_false_and_no_match_send_nothing(app, fake):
    client = app.test_client()
    upload_all(app, client, CORPUS)
    fake.script(Reply(chunks=openai_text("a")), Reply(chunks=openai_text("b")))
    off = events_of(client.post("/api/chat_stream", json={"message": "volcano erupt", "use_rag": False}))
    assert "rag_sources" not in [k for k, _ in off] and len(fake.posts[-1].body["messages"]) == 1
    unrelated = events_of(client.post("/api/chat_stream", json={"message": "hello there"}))
    assert "rag_sources" not in [k for k, _ in unrelated] and len(fake.posts[-1].body["messages"]) == 1
    bad = client.post("/api/chat_stream", json={"message": "x", "use_rag": "maybe"})
    assert bad.status_code == 400 and "use_rag" in bad.get_json()["error"]


def test_retrieval_is_per_owner_and_deleting_an_upload_removes_its_chunks(app, fake):
    client = app.test_client()
    ids = upload_all(app, client, CORPUS)
    assert _retriever(app).search("someone-else", "volcano erupt") == []
    client.delete(f"/api/upload/{ids['volcanoes.txt']}")
    assert all(h["name"] != "volcanoes.txt" for h in search(app, "volcano erupt"))
    store = app.extensions["odysseus.store"]
    with store.locked.read() as db:
        assert (
            db.execute("select count(*) from upload_chunks where upload_id = ?", [ids["volcanoes.txt"]]).fetchone()[0]
            == 0
        )
        assert (
            db.execute("select count(*) from upload_chunks_fts where upload_chunks_fts match 'etna'").fetchone()[0] == 0
        )


def test_unfinished_indexing_resumes_after_a_restart(tmp_path, fake):
    first = make_app(tmp_path, fake)
    client = first.test_client()
    ids = upload_all(first, client, {"late.txt": "Penguins live in Antarctica."})
    store = first.extensions["odysseus.store"]
    with store.locked.tx() as db:  # as if the process died mid-indexing
        db.execute("delete from upload_chunks_fts")
        db.execute("delete from upload_chunks")
        db.execute("update uploads set index_status = 'indexing', chunk_count = 0")
    first.extensions["odysseus.runs"].close()
    second = make_app(tmp_path, fake)
    try:
        assert second.extensions["odysseus.uploads"].indexer.wait(30)
        record = second.test_client().get(f"/api/upload/{ids['late.txt']}").get_json()
        assert record["index_status"] == "indexed" and search(second, "where do penguins live")
    finally:
        second.extensions["odysseus.runs"].close()


def test_an_unreadable_pdf_fails_visibly(app):
    """Kept, and marked: its text was not extracted, and why; the indexer leaves it alone."""
    client = app.test_client()
    ids = upload_all(app, client, {"broken.pdf": b"%PDF-1.4\nthis is not really a pdf"})
    record = client.get(f"/api/upload/{ids['broken.pdf']}").get_json()
    assert record["text_status"] == "not_extracted" and "PDF could not be read" in record["text_note"]
    assert record["index_status"] == "none"


# ---------------------------------------------------------------- embeddings

TOPICS = ["volcano", "bread", "money", "pump"]
SYNONYMS = {
    "volcano": ["volcano", "lava", "magma", "eruption", "erupt", "crater"],
    "bread": ["bread", "dough", "loaf", "bake", "sourdough"],
    "money": ["revenue", "money", "million"],
    "pump": ["pump", "prime", "water"],
}


def toy_vector(text: str):
    """A deterministic 'embedding': how often each topic's words occur (so synonyms are close)."""
    words = re.findall(r"\w+", text.lower())
    vec = [sum(1 for w in words if any(w.startswith(s) for s in SYNONYMS[t])) for t in TOPICS]
    return vec if any(vec) else [0.01] * len(TOPICS)


def embeddings_reply(record):
    if record.path.endswith("/embeddings"):
        inputs = record.body["input"]
        return Reply(
            status=200,
            body={
                "object": "list",
                "model": record.body["model"],
                "data": [
                    {"object": "embedding", "index": i, "embedding": toy_vector(text)} for i, text in enumerate(inputs)
                ],
            },
        )
    return Reply(chunks=openai_text("ok"))


def test_embeddings_find_a_chunk_sharing_no_word_with_the_query(tmp_path):
    with FakeProvider(chooser=embeddings_reply) as server:
        app = make_app(tmp_path, server, EMBEDDING_MODEL="fake/embedder", EMBEDDING_WEIGHT=0.6, RAG_MIN_SCORE=0.3)
        try:
            client = app.test_client()
            upload_all(
                app,
                client,
                {
                    "geo.txt": "Magma and lava came out of the crater.",
                    "kitchen.txt": "Knead the dough and shape the loaf.",
                },
            )
            calls = [r for r in server.posts if r.path == "/v1/embeddings"]
            assert calls and calls[0].body["model"] == "embedder"
            assert sorted(json.dumps(c.body["input"]) for c in calls)  # chunks were embedded
            hits = _retriever(app).search("local", "tell me about an eruption")
            assert hits and hits[0]["name"] == "geo.txt" and hits[0]["score"] >= 0.3
            assert math.isclose(hits[0]["cosine"], 1.0, rel_tol=1e-5) and hits[0]["lexical"] == 0.0
            response = client.post("/api/chat_stream", json={"message": "tell me about an eruption"})
            kinds = [k for k, _ in events_of(response)]
            assert kinds.index("rag_sources") < kinds.index("delta")
            chat = [r for r in server.posts if r.path == "/v1/chat/completions"][-1]
            assert "crater" in chat.body["messages"][-2]["content"]
        finally:
            app.extensions["odysseus.runs"].close()


def test_embeddings_down_keeps_fts(tmp_path, fake):
    app = make_app(tmp_path, fake, EMBEDDING_MODEL="fake/embedder")
    try:
        fake.default = Reply(status=500, body={"error": "no embeddings here"})
        client = app.test_client()
        ids = upload_all(app, client, {"geo.txt": "Magma and lava came out of the crater."})
        record = client.get(f"/api/upload/{ids['geo.txt']}").get_json()
        assert record["index_status"] == "indexed" and "without embeddings" in record["index_error"]
        fake.default = Reply(chunks=openai_text("ok"))
        # the query embedding fails too: retrieval falls back to FTS alone, the reply still comes
        fake.script(Reply(status=500, body={"error": "down"}))
        response = client.post("/api/chat_stream", json={"message": "lava crater"})
        events = dict(events_of(response))
        assert events["rag_sources"]["data"][0]["filename"] == "geo.txt" and "delta" in events
        assert [r.path for r in fake.posts][-2:] == ["/v1/embeddings", "/v1/chat/completions"]
    finally:
        app.extensions["odysseus.runs"].close()
