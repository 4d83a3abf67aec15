"""The model's window without a server: token estimates and their correction, trimming order,
tool-call pairs, the newest message shortened, compaction's row choice, and window discovery
against small local servers speaking Ollama's, vLLM's and llama.cpp's protocols."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from odysseus.config import load_config
from odysseus.context import Injection
from odysseus.context.compaction import older_half, transcript, visible
from odysseus.context.tokens import TokenCounter, correction_from
from odysseus.context.trim import droppable_units, fit
from odysseus.context.turn_window import merged
from odysseus.context.window import WindowBook
from odysseus.errors import OdysseusError
from odysseus.events import Event
from odysseus.llm.base import ProviderConfig
from odysseus.llm.llm_core import Candidate
from odysseus.llm.registry import build_providers

COUNTER = TokenCounter("openai")  # 4 characters a token, 4 tokens per message


def msg(role, n, tag="", **extra):
    return {"role": role, "content": (tag + " " + "x" * n)[: max(n, len(tag))], **extra}


def test_estimate_and_correction_from_the_last_measured_reply():
    text = {"role": "user", "content": "a" * 400}
    assert COUNTER.raw([text]) == 104
    history = [
        {"role": "assistant", "metadata": {"context": {"raw_tokens": 100, "prompt_tokens": 150}}},
        {"role": "user", "metadata": {}},
        {"role": "assistant", "metadata": {"usage": {}}},
    ]
    assert correction_from(history) == 1.5
    assert TokenCounter("openai", 1.5).count([text]) == 156
    assert (
        correction_from([{"role": "assistant", "metadata": {"context": {"raw_tokens": 100, "prompt_tokens": 1}}}])
        == 0.25
    )  # a broken report is bounded
    assert correction_from([]) == 1.0
    image = {"role": "user", "content": "", "parts": [{"type": "image", "data": "AAAA", "mime": "image/png"}]}
    assert COUNTER.raw([image]) > 500


def test_a_counter_counts_each_message_once_and_a_changed_copy_afresh(monkeypatch):
    import odysseus.context.tokens as tokens

    measured = []
    real = tokens.message_chars
    monkeypatch.setattr(tokens, "message_chars", lambda m: measured.append(m) or real(m))
    counter = TokenCounter("openai")
    messages = [{"role": "user", "content": "a" * 400}, {"role": "assistant", "content": "b" * 40}]
    first = counter.raw(messages)
    assert counter.raw(messages) == counter.count(messages) == first == 104 + 14
    assert len(measured) == 2  # the same dicts again: no new count
    shortened = dict(messages[0], content="a" * 40)  # trim copies a message to change it
    assert counter.raw([shortened, messages[1]]) == 14 + 14 and len(measured) == 3
    assert TokenCounter("openai").raw(messages) == first  # a new counter (a new turn) counts again


def test_trim_drops_lowest_scored_extras_first_then_oldest_turns_never_the_system_prompt():
    base = [
        msg("system", 400, "PROMPT"),
        msg("user", 400, "old-q"),
        msg("assistant", 400, "old-a"),
        msg("user", 400, "mid-q"),
        msg("assistant", 400, "mid-a"),
        msg("user", 100, "NOW"),
    ]
    extras = [
        Injection("web", text="w" * 400, score=0.5),
        Injection("rag", text="r" * 400, score=0.9),
        Injection("attachments", text="ATTACHED " + "a" * 40, score=None),
    ]
    # everything: 5 * 104 + 29 + the injected block (~217) = about 766 tokens
    result = fit(base, extras, 700, COUNTER)
    assert [i.source for i in result.dropped] == ["web"] and result.messages_after == 5  # one extra was enough
    result = fit(base, extras, 480, COUNTER)
    assert [i.source for i in result.dropped] == ["web", "rag"]  # lowest score first; None never
    result = fit(base, extras, 300, COUNTER)
    contents = [m["content"] for m in result.messages]
    assert contents[0].startswith("PROMPT") and contents[-1].startswith("NOW")
    assert not any(c.startswith("old-") for c in contents)  # the oldest turn went first, as a pair
    assert any("ATTACHED" in c for c in contents)
    assert result.messages_before == 5 and result.messages_after < 5 and result.tokens_after <= 300
    counts = result.counts(1000)
    assert set(counts) >= {"messages_before", "messages_after", "tokens_before", "tokens_after", "context_length"}


def test_tool_calls_stay_with_their_results():
    call = {"id": "c1", "type": "function", "function": {"name": "web_search", "arguments": "{}"}}
    base = [
        msg("system", 40, "SYS"),
        msg("user", 400, "q1"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r" * 400},
        msg("assistant", 200, "a1"),
        msg("user", 40, "q2"),
        {"role": "assistant", "content": None, "tool_calls": [dict(call, id="c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "s" * 800},
        {"role": "assistant", "content": None, "tool_calls": [dict(call, id="c3")]},
        {"role": "tool", "tool_call_id": "c3", "content": "t" * 100},
    ]
    units = droppable_units(base)
    assert units == [[1, 2, 3, 4], [6, 7]]  # the older turn whole; the current turn's older round; the newest stays
    for budget in (600, 400, 250, 100):
        sent = fit(base, [], budget, COUNTER).messages
        ids_called = {c["id"] for m in sent for c in m.get("tool_calls") or []}
        ids_answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
        assert ids_called == ids_answered  # never a call without its result, or a result without its call
        assert "c3" in ids_called and sent[0]["content"].startswith("SYS")


def test_the_newest_message_is_shortened_last_with_a_marker():
    base = [msg("system", 40, "SYS"), msg("user", 4000, "HUGE")]
    result = fit(base, [], 300, COUNTER)
    last = result.messages[-1]["content"]
    assert last.startswith("HUGE") and "were cut to fit the model's context window" in last
    assert result.shortened_chars > 2000 and result.tokens_after <= 300 and result.trimmed
    assert not fit(base, [], 5000, COUNTER).trimmed


def test_merged_memories_events():
    pinned = Injection(
        "memories",
        event=Event("memories_used", {"data": [{"id": 1}]}),
        text="p",
        metadata={"memories_used": [{"id": 1}]},
    )
    recalled = Injection(
        "memories",
        event=Event("memories_used", {"data": [{"id": 2}]}),
        text="r",
        score=0.8,
        metadata={"memories_used": [{"id": 2}]},
    )
    one = merged([pinned, recalled])
    assert len(one) == 1 and one[0].event.data["data"] == [{"id": 1}, {"id": 2}]
    assert one[0].metadata["memories_used"] == [{"id": 1}, {"id": 2}]


def test_visible_hides_summarised_rows_and_older_half_ends_before_a_user_message():
    rows = [
        {"id": i, "role": "user" if i % 2 else "assistant", "content": f"m{i}", "metadata": {}} for i in range(1, 10)
    ]
    chosen = older_half(rows)
    assert [r["id"] for r in chosen] == [1, 2, 3, 4] and rows[len(chosen)]["role"] == "user"
    summary = {
        "id": 20,
        "role": "system",
        "content": "S",
        "metadata": {"compacted": True, "summarized_ids": [1, 2, 3, 4]},
    }
    seen = visible(rows + [summary])
    assert (
        seen[0]["id"] == 20 and seen[0]["content"].endswith("S") and [r["id"] for r in seen[1:]] == list(range(5, 10))
    )
    again = older_half(seen)
    assert again[0]["id"] == 20  # a second compaction folds the first summary in
    text = transcript(seen, 2, 10_000)
    assert text.startswith("Earlier summary: S") and "User: m5" in text


class _Reporting(BaseHTTPRequestHandler):
    """Ollama /api/show, an OpenAI listing with vLLM's max_model_len, llama.cpp /props."""

    protocol_version = "HTTP/1.1"
    hits: list = []
    counting = True  # llama.cpp's /apply-template and /tokenize (one token per 2 characters here)

    def log_message(self, *args):
        pass

    def _send(self, payload, status=200):
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        self.hits.append(self.path)
        if self.path == "/v1/models":
            self._send(
                {
                    "data": [
                        {"id": "big", "max_model_len": 32768},
                        {"id": "plain"},
                        # llama.cpp lists the training length only: the served /props n_ctx must win
                        {"id": "trained", "meta": {"n_ctx_train": 32768}},
                    ]
                }
            )
        elif self.path == "/props":
            self._send({"default_generation_settings": {"n_ctx": 4096}})
        else:
            self._send({"error": "no"}, 404)

    def do_POST(self):
        self.hits.append(self.path)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/api/show" and body.get("model") == "llama3":
            self._send({"model_info": {"llama.context_length": 131072}, "parameters": "num_ctx 16384\nstop x"})
        elif self.path == "/api/show":
            self._send({"model_info": {"qwen2.context_length": 32768}})
        elif self.path == "/apply-template" and self.counting:
            self._send({"prompt": "".join(f"<{m['role']}>{m['content']}" for m in body["messages"])})
        elif self.path == "/tokenize" and self.counting:
            self._send({"tokens": list(range(len(body["content"]) // 2))})
        else:
            self._send({"error": "no"}, 404)


@pytest.fixture
def reporting():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Reporting)
    _Reporting.hits = []
    _Reporting.counting = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_window_from_config_then_provider_then_default(reporting, tmp_path):
    config_file = tmp_path / "c.toml"
    config_file.write_text(f'''
[[providers]]
name = "vllm"
kind = "openai"
base_url = "{reporting}/v1"
models = [{{name = "configured", context_length = 2048}}, "big", "plain", "trained"]

[[providers]]
name = "ol"
kind = "ollama"
base_url = "{reporting}"

[[providers]]
name = "hosted"
kind = "anthropic"
api_key = "k"
context_length = {{claude = 200000}}
''')
    config = load_config({"ODYSSEUS_CONFIG": str(config_file)})
    assert config["PROVIDERS"][0].models == ["configured", "big", "plain", "trained"]
    providers = {p.name: p for p in build_providers(config)}
    book = WindowBook(config)
    assert book.length(Candidate(providers["vllm"], "configured")) == (2048, "config")
    assert book.length(Candidate(providers["vllm"], "big")) == (32768, "provider")
    assert book.length(Candidate(providers["vllm"], "plain")) == (4096, "provider")  # llama.cpp /props
    # the served context (/props) over the training length the listing states (issue 37, defect 5)
    assert book.length(Candidate(providers["vllm"], "trained")) == (4096, "provider")
    assert book.length(Candidate(providers["ol"], "llama3")) == (16384, "provider")  # num_ctx wins
    assert book.length(Candidate(providers["ol"], "qwen")) == (32768, "provider")
    assert book.length(Candidate(providers["hosted"], "claude")) == (200000, "config")
    assert book.length(Candidate(providers["hosted"], "other")) == (128000, "default")
    hits = len(_Reporting.hits)
    book.length(Candidate(providers["vllm"], "big"))
    assert len(_Reporting.hits) == hits  # cached
    assert book.reserve(8192) == 1024 and book.reserve(2048) == 512 and book.reserve(8192, 100) == 100
    assert book.reserve(8192, 100_000) == 2048  # never more than a quarter


def test_a_silent_or_down_provider_gets_the_default(tmp_path):
    cfg = ProviderConfig(name="down", kind="openai", base_url="http://127.0.0.1:9/v1", models=["m"])
    provider = build_providers({"PROVIDERS": [cfg]})[0]
    book = WindowBook({"DEFAULT_CONTEXT_WINDOW": 8192, "CONTEXT_WINDOW_PROBE_TIMEOUT": 2.0})
    assert book.length(Candidate(provider, "m")) == (8192, "default")
    with pytest.raises(OdysseusError, match="needs a name"):
        load_config(
            {
                "ODYSSEUS_CONFIG": str(
                    _write(tmp_path, '[[providers]]\nkind = "openai"\nmodels = [{context_length = 3}]\n')
                )
            }
        )


def _write(tmp_path, text):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return path


def test_an_edited_base_url_is_asked_again_not_served_from_the_old_servers_cache(reporting):
    """An admin edit keeps the connection's name but points it elsewhere: the cached window of the old
    server must not answer for the new one (the cache is keyed by where requests go, not only the name)."""
    book = WindowBook({"DEFAULT_CONTEXT_WINDOW": 8192, "CONTEXT_WINDOW_PROBE_TIMEOUT": 2.0})
    down = build_providers({"PROVIDERS": [ProviderConfig("lab", "openai", base_url="http://127.0.0.1:9/v1")]})[0]
    assert book.length(Candidate(down, "big")) == (8192, "default")  # silent: cached as silence
    moved = build_providers({"PROVIDERS": [ProviderConfig("lab", "openai", base_url=reporting + "/v1")]})[0]
    assert book.length(Candidate(moved, "big")) == (32768, "provider")
    assert book.length(Candidate(down, "big")) == (8192, "default")  # the old address keeps its own entry


def test_a_summary_is_capped_to_its_share_of_the_window():
    """Issue 37 defect 4: the summary request fits the window, and a longer answer is shortened."""
    from odysseus.context.compaction import SHORTENED, Compactor
    from odysseus.events import delta, finish
    from odysseus.llm.llm_core import Candidate

    asked = []

    class Wordy:
        kind, name = "scripted", "wordy"

        def stream(self, request, cancel):
            asked.append(request.max_tokens)
            yield delta("word " * 2000)  # ignores max_tokens
            yield finish("length")

    compactor = Compactor(None, {})
    summary, _ = compactor.summarize([Candidate(Wordy(), "m")], [{"role": "user", "content": "hello"}], 512)
    assert asked == [128]  # a quarter of 512, not COMPACT_SUMMARY_TOKENS' 600
    assert summary.endswith(SHORTENED) and len(summary) <= 128 * 3


def test_a_llamacpp_server_counts_a_prompt_and_one_that_cannot_is_not_asked_again(reporting):
    """Issue 37 defect 3: the real count from llama.cpp's own template and tokenizer."""
    book = WindowBook({"CONTEXT_WINDOW_PROBE_TIMEOUT": 2.0, "CONTEXT_WINDOW_CACHE_SECONDS": 600})
    local = build_providers({"PROVIDERS": [ProviderConfig("lab", "openai", base_url=reporting + "/v1")]})[0]
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "1234567890" * 4}]
    rendered = "<system>be brief<user>" + "1234567890" * 4
    assert book.prompt_tokens(Candidate(local, "m"), messages) == len(rendered) // 2
    assert _Reporting.hits[-2:] == ["/apply-template", "/tokenize"]
    parts = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]
    assert book.prompt_tokens(Candidate(local, "m"), parts) is None  # images: only the server knows
    assert _Reporting.hits[-1] == "/tokenize"  # not asked
    other = build_providers({"PROVIDERS": [ProviderConfig("vllm", "openai", base_url=reporting + "/v1/")]})[0]
    _Reporting.counting = False  # a server without the endpoints (vLLM, LM Studio)
    assert book.prompt_tokens(Candidate(other, "m"), messages) is None
    asked = len(_Reporting.hits)
    assert book.prompt_tokens(Candidate(other, "m"), messages) is None
    assert len(_Reporting.hits) == asked  # remembered: not asked again on every turn
    hosted = build_providers({"PROVIDERS": [ProviderConfig("oa", "openai", base_url="https://api.openai.com/v1")]})[0]
    assert book.prompt_tokens(Candidate(hosted, "m"), messages) is None  # never asked of a hosted API
