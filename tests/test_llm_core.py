"""llm_core over real adapters: fallback before output only, metrics, cost, estimation, routes, config."""

import threading

import pytest
from fakeproviders import FakeProvider, Reply, openai_text, refused_url
from provider_helpers import HELLO, make

from odysseus.cancel import Cancelled, CancelToken
from odysseus.config import load_config
from odysseus.errors import NotFound, ProviderError
from odysseus.llm.base import ChatRequest
from odysseus.llm.catalog import ModelCatalog
from odysseus.llm.llm_core import ModelRouter, stream_route
from odysseus.llm.metrics import cost_of
from odysseus.llm.registry import build_providers, prices_for

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500}


@pytest.fixture
def pair():
    first, second = FakeProvider(), FakeProvider()
    yield first, second
    first.close()
    second.close()


def router_for(*providers, routes=None):
    return ModelRouter(providers, routes or {})


def run(candidates, cancel=None):
    events, error = [], None
    try:
        for event in stream_route(candidates, ChatRequest("ignored", HELLO), cancel or CancelToken()):
            events.append(event)
    except ProviderError as exc:
        error = exc
    return events, error


def types(events):
    return [e.type for e in events]


@pytest.mark.parametrize(
    "first_reply",
    [
        None,  # refused
        Reply(end="silent"),
        Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "5"}),
        Reply(status=500, body={"error": {"message": "boom"}}),
        Reply(chunks=["data: {broken\n\n"]),
        Reply(status=401, body={"error": {"message": "bad key"}}),
        Reply(status=404, body={"error": {"message": "unknown model"}}),
        Reply(chunks=openai_text("x")[:1], end="reset"),  # only the role chunk: no output yet
    ],
    ids=["refused", "no-first-byte", "429", "500", "malformed", "401", "404", "reset-before-output"],
)
def test_fallback_when_the_first_fails_before_output(pair, first_reply):
    first, second = pair
    url = refused_url() if first_reply is None else first.url
    if first_reply:
        first.script(first_reply)
    second.script(Reply(chunks=openai_text("from ", "backup", usage=USAGE)))
    router = router_for(
        make("openai", url + "/v1", name="main"),
        make("openai", second.url + "/v1", name="spare"),
        routes={"smart": ["main/big", "spare/small"]},
    )
    events, error = run(router.resolve("smart"))
    assert error is None
    assert types(events)[:2] == ["model_info", "fallback"]
    assert events[0].data["route"] == "spare/small" and events[0].data["model"] == "small"
    fallback = events[1].data
    assert fallback["requested"] == "main/big" and fallback["answered"] == "spare/small"
    assert fallback["reason"].startswith("main/big: ")
    assert fallback["failures"][0]["status"] in (401, 404, 429, 500, 502, 503, 504)
    assert "".join(e.data["delta"] for e in events if e.type == "delta") == "from backup"
    assert second.posts[0].body["model"] == "small"
    assert events[-1].type == "metrics" and events[-1].data["data"]["route"] == "spare/small"


@pytest.mark.parametrize("end", ["stall", "reset", "cut"])
def test_no_fallback_once_output_started(pair, end):
    first, second = pair
    first.script(Reply(chunks=openai_text("half ", "way", done=False)[:2], end=end))
    second.script(Reply(chunks=openai_text("never")))
    router = router_for(
        make("openai", first.url + "/v1", name="main"),
        make("openai", second.url + "/v1", name="spare"),
        routes={"smart": ["main/big", "spare/small"]},
    )
    events, error = run(router.resolve("smart"))
    assert error is not None and error.status in (502, 504)
    assert types(events) == ["model_info", "provider_meta", "delta", "metrics"]
    assert events[-1].data["data"]["partial"] is True
    assert second.posts == []


def test_all_candidates_failing_raises_the_last_error(pair):
    first, second = pair
    first.script(Reply(status=500, body={"error": "a"}))
    second.script(Reply(status=404, body={"error": {"message": "no such model"}}))
    router = router_for(
        make("openai", first.url + "/v1", name="a"),
        make("openai", second.url + "/v1", name="b"),
        routes={"r": ["a/x", "b/y"]},
    )
    events, error = run(router.resolve("r"))
    assert events == [] and error.status == 404
    assert error.message.startswith("All candidates failed: a/x: ") and "b/y: " in error.message


def test_default_model_is_discovered_once(pair):
    first, _ = pair
    first.get_json["/v1/models"] = {"data": [{"id": "loaded-model"}]}
    router = router_for(make("openai", first.url + "/v1", name="local"))
    assert [c.route_id for c in router.resolve(None)] == ["local/loaded-model"]
    assert [c.route_id for c in router.resolve("")] == ["local/loaded-model"]
    assert len([r for r in first.records if r.method == "GET"]) == 1


def test_stop_is_not_a_reason_to_fall_back(pair):
    first, second = pair
    first.script(Reply(end="silent"))
    router = router_for(
        make("openai", first.url + "/v1", name="a", app_config={"FIRST_TOKEN_TIMEOUT": 30}),
        make("openai", second.url + "/v1", name="b"),
        routes={"r": ["a/x", "b/y"]},
    )
    cancel = CancelToken()
    threading.Timer(0.3, cancel.cancel).start()
    with pytest.raises(Cancelled):
        run(router.resolve("r"), cancel)
    assert second.posts == []


def test_metrics_with_usage_and_cost(pair):
    first, _ = pair
    first.script(Reply(chunks=openai_text("a", "b", usage=USAGE)))
    provider = make("openai", first.url + "/v1", name="main")
    provider.prices = prices_for(
        "main",
        {
            "TABLES": {
                "prices": {
                    "main/big": {"input_per_mtok": 3.0, "output_per_mtok": 15.0},
                    "other/big": {"input_per_mtok": 99},
                }
            }
        },
    )
    events, error = run(router_for(provider).resolve("main/big"))
    metrics = events[-1].data["data"]
    assert metrics["input_tokens"] == 1000 and metrics["output_tokens"] == 500
    assert metrics["tokens_estimated"] is False
    assert metrics["cost"] == pytest.approx(1000 * 3 / 1e6 + 500 * 15 / 1e6)
    assert metrics["cost_estimated"] is False
    assert metrics["time_to_first_token"] is not None and metrics["total_time"] >= metrics["time_to_first_token"]
    assert metrics["tokens_per_second"] > 0


def test_metrics_estimated_when_provider_sends_no_usage(pair):
    first, _ = pair
    first.script(Reply(chunks=openai_text("x" * 40)))
    provider = make("openai", first.url + "/v1", name="main")
    provider.prices = {"big": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
    events, _ = run(router_for(provider).resolve("main/big"))
    metrics = events[-1].data["data"]
    assert metrics["output_tokens"] == 10 and metrics["output_tokens_estimated"] is True
    assert metrics["input_tokens"] >= 1 and metrics["input_tokens_estimated"] is True
    assert metrics["cost_estimated"] is True and "cost" in metrics
    first.script(Reply(chunks=openai_text("y")))
    assert "cost" not in run(router_for(make("openai", first.url + "/v1", name="p")).resolve("p/m"))[0][-1].data["data"]


def test_cost_of_handles_missing_and_bad_prices():
    assert cost_of(None, 1, 1) is None
    assert cost_of({"input_per_mtok": "x"}, 1, 1) is None
    assert cost_of({"output_per_mtok": 10}, None, 100_000) == 1.0


def test_prices_for_prefers_the_provider_entry():
    tables = {
        "TABLES": {
            "prices": {
                "gpt": {"input_per_mtok": 1},
                "a/gpt": {"input_per_mtok": 2},
                "b/gpt": {"input_per_mtok": 3},
                "a/org/model": {"input_per_mtok": 4},
            }
        }
    }
    assert prices_for("a", tables) == {"gpt": {"input_per_mtok": 2}, "org/model": {"input_per_mtok": 4}}
    assert prices_for("c", tables) == {"gpt": {"input_per_mtok": 1}}


def test_router_resolution(pair):
    first, second = pair
    a = make("openai", first.url + "/v1", name="a", models=["m1", "m2"])
    b = make("ollama", second.url, name="b", default_model="llama3")
    router = router_for(a, b, routes={"default": ["b/", "a/m2"]})
    assert [c.route_id for c in router.resolve(None)] == ["b/llama3", "a/m2"]
    assert [c.route_id for c in router.resolve("a/")] == ["a/m1"]
    assert [c.route_id for c in router.resolve("m2")] == ["a/m2"]
    with pytest.raises(NotFound):
        router.resolve("unknown-model")
    single = router_for(make("openai", first.url + "/v1", name="or"))
    assert [c.route_id for c in single.resolve("meta-llama/llama-3")] == ["or/meta-llama/llama-3"]


def test_config_loads_providers_from_env_and_toml(tmp_path, monkeypatch):
    toml = tmp_path / "odysseus.toml"
    toml.write_text("""
idle_timeout = 7.5

[[providers]]
name = "local"
kind = "openai"
base_url = "http://127.0.0.1:8080/v1/"
models = ["qwen3"]
first_token_timeout = 300
api_key_env = "LOCAL_KEY"

[[providers]]
name = "claude"
kind = "anthropic"
api_key = "sk-ant"
default_model = "claude-sonnet"
max_tokens = 2048

[routes]
default = ["local/qwen3", "claude/claude-sonnet"]

[prices."claude/claude-sonnet"]
input_per_mtok = 3.0
output_per_mtok = 15.0
""")
    env = {
        "ODYSSEUS_CONFIG": str(toml),
        "LOCAL_KEY": "k1",
        "OLLAMA_HOST": "127.0.0.1:11434",
        "OLLAMA_MODEL": "llama3",
        "OPENAI_API_KEY": "sk-openai",
    }
    monkeypatch.setenv("LOCAL_KEY", "k1")  # api_key_env is read from the process environment
    config = load_config(env)
    by_name = {p.name: p for p in config["PROVIDERS"]}
    assert list(by_name) == ["local", "claude", "ollama", "openai"]
    assert by_name["local"].base_url == "http://127.0.0.1:8080/v1" and by_name["local"].api_key == "k1"
    assert by_name["local"].options == {"first_token_timeout": 300}
    assert by_name["ollama"].base_url == "http://127.0.0.1:11434" and by_name["ollama"].default_model == "llama3"
    assert by_name["openai"].base_url == "https://api.openai.com/v1"
    assert config["ROUTES"] == {"default": ["local/qwen3", "claude/claude-sonnet"]}
    assert config["IDLE_TIMEOUT"] == 7.5
    providers = {p.name: p for p in build_providers(config)}
    assert providers["local"].timeouts.first_token == 300 and providers["local"].timeouts.idle == 7.5
    assert providers["local"].default_model == "qwen3"
    assert providers["claude"].max_tokens == 2048 and providers["claude"].api_key == "sk-ant"
    assert providers["claude"].prices == {"claude-sonnet": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}
    assert providers["ollama"].kind == "ollama" and providers["openai"].kind == "openai"


def test_catalog_lists_reachable_providers_and_caches(pair):
    first, _ = pair
    first.get_json["/v1/models"] = {"data": [{"id": "m1"}]}
    catalog = ModelCatalog(
        [make("openai", first.url + "/v1", name="up"), make("openai", refused_url() + "/v1", name="down")], ttl=60
    )
    listing = catalog.list()
    assert [m["id"] for m in listing["models"]] == ["up/m1"]
    assert listing["errors"][0]["provider"] == "down" and listing["errors"][0]["status"] == 503
    gets = len(first.records)
    assert catalog.list() is listing and len(first.records) == gets
    catalog.list(refresh=True)
    assert len(first.records) == gets + 1
