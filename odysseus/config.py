"""Configuration: defaults -> TOML file (``ODYSSEUS_CONFIG``) -> ``ODYSSEUS_*`` env -> test overrides.

Keys are flat upper-case names (Flask style). Environment variables are the key
prefixed with ``ODYSSEUS_`` (``ODYSSEUS_HEARTBEAT_INTERVAL=5``) and are parsed as
the type of the default. The TOML file uses the same keys in lower case at top
level, plus ``[[providers]]`` tables and a ``[routes]`` table. Providers also come
from the conventional variables ``OPENAI_BASE_URL``/``OPENAI_API_KEY``,
``OLLAMA_HOST`` and ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``, each with an optional
``OPENAI_MODEL`` / ``OLLAMA_MODEL`` / ``ANTHROPIC_MODEL`` default model.
"""

from __future__ import annotations

import os
import tomllib
from typing import Any, Dict, List, Mapping, Optional

from .errors import OdysseusError
from .llm.base import ProviderConfig

DEFAULTS: Dict[str, Any] = {
    "DATA_DIR": "instance",
    "MAX_BODY_BYTES": 1024 * 1024,
    "MAX_MESSAGE_CHARS": 200_000,
    "HISTORY_CONTEXT_MESSAGES": 1000,  # newest saved messages a turn's model context is built from
    # The model's window (odysseus.context.window / trim / compaction; README "Context window")
    "DEFAULT_CONTEXT_WINDOW": 8192,  # tokens, for local models that neither config nor the server size
    "DEFAULT_CONTEXT_WINDOW_HOSTED": 128_000,  # tokens, for hosted models that neither config nor the server size
    "CONTEXT_WINDOW_CACHE_SECONDS": 600.0,  # how long a provider's reported window (or its silence) is kept
    "CONTEXT_WINDOW_PROBE_TIMEOUT": 5.0,  # seconds to ask a provider for its window
    "REPLY_RESERVE_TOKENS": 1024,  # tokens kept free for the reply when the request gives no max_tokens
    "COMPACT_THRESHOLD": 0.8,  # share of the window the history may use before its older half is summarised; 0 = never
    "COMPACT_MIN_MESSAGES": 6,  # messages a conversation needs before it is compacted
    "COMPACT_TIMEOUT": 60.0,  # seconds a summary request may take
    "COMPACT_SUMMARY_TOKENS": 600,  # max_tokens of a summary
    "COMPACT_MESSAGE_CHARS": 4000,  # characters of each message that go into a summary request
    "COMPACT_INPUT_CHARS": 48_000,  # characters of transcript a summary request carries at most
    "UTILITY_MODEL": "",  # route for summaries; empty = the model of the turn
    # Run engine
    "HEARTBEAT_INTERVAL": 10.0,  # seconds of silence before ": heartbeat N"
    "SSE_RETRY_MS": 3000,  # the "retry:" field on the first frame of every stream (client reconnect delay)
    "MAX_STREAMS_PER_USER": 32,  # open SSE streams per user and worker process; one more is a 429
    "EVICT_GRACE": 180.0,  # seconds a finished run's log stays after its last subscriber leaves
    "RUN_MAX_EVENTS": 100_000,  # per-run log cap
    "RUN_MAX_BYTES": 16 * 1024 * 1024,  # per-run log cap (payload bytes)
    "PROCESS_MAX_BYTES": 512 * 1024 * 1024,  # all logs in this process
    "MAX_ACTIVE_RUNS": 5000,
    "RUN_WALL_TIMEOUT": 1800.0,  # seconds a run may take in all
    "RUN_IDLE_TIMEOUT": 300.0,  # seconds a run may go without an event
    "EVENT_FLUSH_INTERVAL": 0.2,  # seconds between group commits of the durable run log (text lost on a crash)
    "DURABLE_EVENTS": True,  # write every logged event through to SQLite (off only for benchmarks)
    "RUN_LEASE_SECONDS": 15.0,  # a run's lease; a run whose worker stopped renewing it is recovered after this
    "FINAL_SAVE_PATIENCE": 20.0,  # seconds a run waits for its final save before ending in memory (save retried)
    "SHUTDOWN_GRACE": 20.0,  # seconds running runs may go on after SIGTERM/reload before ending as interrupted
    "RUN_BACKEND": "memory",  # "memory": runs live in the worker process (one worker only); "redis": several
    "REDIS_URL": "",  # the Redis server of RUN_BACKEND=redis (redis://host:port/db)
    "REDIS_PREFIX": "odysseus:",  # prefix of every Redis key (two installs may share one Redis server)
    "SESSION_LOCK_SECONDS": 30.0,  # expiry of a session's start lock in Redis (a crashed worker frees it)
    "STOP_WAIT": 5.0,  # seconds stop() waits for the run to settle
    "BACKGROUND_WORKERS": 2,  # background jobs running at once
    # Conversations (the page's features)
    "TITLE_MODE": "model",  # "model": ask TITLE_MODEL (or the answering model) for a title; "first_line": never ask
    "TITLE_MODEL": "",  # route for session titles after the first reply; empty = the model that answered
    "TITLE_TIMEOUT": 20.0,  # seconds a title request may take before the first line of the message is used
    # Demo model
    "DEMO_TOKEN_DELAY": 0.03,  # seconds between demo tokens
    # Providers
    "DEFAULT_MODEL": "",
    "CONNECT_TIMEOUT": 10.0,
    "FIRST_TOKEN_TIMEOUT": 120.0,
    "IDLE_TIMEOUT": 60.0,
    "MODELS_CACHE_SECONDS": 30.0,
    "DEFAULT_MAX_TOKENS": 4096,  # for APIs that require max_tokens (Anthropic)
    # Agent mode (odysseus.agent): guards, approvals and tools
    "AGENT_MAX_ROUNDS": 10,  # model rounds per request before rounds_exhausted
    "AGENT_MAX_TOOL_CALLS": 30,  # tool calls per request before budget_exceeded
    "AGENT_LOOP_REPEATS": 3,  # rounds repeating one call with no new text before the loop breaker
    "AGENT_MAX_NUDGES": 2,  # intent nudges per request before intent_nudge_exhausted
    "AGENT_APPROVAL_TTL": 600.0,  # seconds an approval request stays valid
    "AGENT_APPROVAL_TOOLS": "run_python,shell",  # tools that need the user's approval
    "AGENT_TOOLS": "web_search,fetch_url,run_python,shell,generate_image,update_plan,ui_control,present_exhibit,"
                   "manage_memory",
    "CITATIONS_AUTO_CAPTURE_WEB_SEARCH": True,  # passive citation exhibit after web_search (TOML [citations])
    "AGENT_SYSTEM_PROMPT": "",  # replaces the built-in agent system prompt when set
    # Agent Alloy workflows (odysseus.alloy; TOML [alloy]): a supervisor delegating to specialists
    "ALLOY_MAX_DEPTH": 1,  # delegation levels below the supervisor (1-3): 1 = specialists cannot delegate
    "ALLOY_MAX_PARALLEL_DELEGATIONS": 3,  # delegations of one round running at once
    "ALLOY_DELEGATION_TIMEOUT": 300.0,  # seconds one delegation may take
    "ALLOY_DELEGATION_MAX_ROUNDS": 6,  # model rounds (tool rounds) a specialist gets per delegation
    "TOOL_TIMEOUT": 60.0,  # seconds any tool may run
    "TOOL_PROGRESS_INTERVAL": 1.0,  # seconds between tool_progress events of a running tool
    "TOOL_OUTPUT_CAP": 20_000,  # characters of a tool result the model sees
    "CODE_TIMEOUT": 30.0,  # seconds run_python / shell may run
    "TOOL_OUTPUT_MAX_BYTES": 1024 * 1024,  # bytes of a code tool's output kept; the rest dropped with a marker
    # Code sandbox (odysseus.tools.sandbox): bubblewrap, one fresh sandbox per call
    "SANDBOX_BWRAP": "bwrap",  # the bubblewrap binary; when it cannot run, code tools are not offered
    "SANDBOX_UID": 65534,  # uid/gid the sandbox runs as when the server runs as root (else the server's own)
    "SANDBOX_GID": 65534,
    "SANDBOX_CPU_SECONDS": 60,  # RLIMIT_CPU per call
    "SANDBOX_MEMORY_BYTES": 1024 ** 3,  # RLIMIT_AS per process
    "SANDBOX_MAX_PROCESSES": 64,  # RLIMIT_NPROC inside the sandbox
    "SANDBOX_MAX_FILE_BYTES": 64 * 1024 ** 2,  # RLIMIT_FSIZE: largest file a call may write
    "SANDBOX_MAX_OPEN_FILES": 256,  # RLIMIT_NOFILE
    "SANDBOX_TMP_BYTES": 64 * 1024 ** 2,  # size of the private /tmp (tmpfs)
    "CODE_TOOLS_UNSANDBOXED": False,  # run code tools without bubblewrap: single-user mode only, refused otherwise
    "WEB_SEARCH_BACKEND": "duckduckgo",  # "searxng", "duckduckgo" or "" (off)
    "SEARXNG_URL": "",  # base URL of a SearXNG instance with the JSON format enabled
    "DUCKDUCKGO_URL": "https://html.duckduckgo.com/html/",
    "WEB_SEARCH_RESULTS": 5,
    "FETCH_TIMEOUT": 15.0,  # seconds for fetch_url (connect + read)
    "FETCH_MAX_BYTES": 2_000_000,  # bytes of a page fetch_url reads at most
    "FETCH_ALLOW_PRIVATE": False,  # let fetch_url reach loopback/private/link-local addresses
    "FETCH_ALLOWED_NETWORKS": "",  # comma-separated CIDRs fetch_url may reach despite the SSRF guard
    "IMAGES_BASE_URL": "",  # OpenAI-compatible base URL (…/v1) for generate_image; empty = tool off
    "IMAGES_API_KEY": "",
    "IMAGES_MODEL": "",
    "IMAGES_TIMEOUT": 120.0,
    # Editor documents (odysseus.documents)
    "DOCUMENT_MAX_BYTES": 1024 * 1024,  # UTF-8 bytes one document may hold; a larger write is refused
    "DOCUMENT_CONTEXT_CHARS": 60_000,  # characters of the active document (line-numbered) sent to the model
    "DOCUMENT_FOLD_SECONDS": 60.0,  # a user save within this of the user's previous version replaces it
    "DOCUMENT_PREVIEW_INTERVAL": 0.1,  # seconds between doc_stream_delta previews, at least
    # Uploads, attachments and retrieval (odysseus.context.attachments / retrieval; README "Uploads")
    "UPLOAD_MAX_BYTES": 10 * 1024 * 1024,  # bytes per uploaded file
    "UPLOAD_MAX_FILES": 10,  # files per upload request (and attachments per turn)
    "UPLOAD_QUOTA_BYTES": 200 * 1024 * 1024,  # bytes of uploads each user may keep
    "ATTACH_TEXT_BUDGET": 24_000,  # characters of attached text inlined per turn (shared by all files)
    "VISION_MODELS": "",  # comma-separated globs (provider/model or model) that accept images; see also vision=
    "RAG_CHUNK_CHARS": 1000,  # target characters per indexed chunk
    "RAG_CHUNK_OVERLAP": 150,  # characters repeated between neighbouring chunks
    "RAG_TOP_K": 4,  # chunks retrieved per turn at most
    "RAG_MIN_SCORE": 0.25,  # chunks scoring below this (0..1) are not used
    "RAG_MAX_CHARS": 6000,  # characters of retrieved text per turn
    "RAG_INDEX_MAX_CHARS": 2_000_000,  # characters of one file's text that are indexed
    "EMBEDDING_MODEL": "",  # provider/model for embeddings (OpenAI /v1/embeddings, Ollama /api/embed); "" = FTS only
    "EMBEDDING_WEIGHT": 0.5,  # share of the vector similarity in the blended score
    "EMBEDDING_TIMEOUT": 30.0,  # seconds per embeddings request
    "EMBEDDING_BATCH": 32,  # chunks per embeddings request
    # Context the user brings (odysseus.context): memories, web sources in chat, workspace selection
    "MEMORY_RECALL_LIMIT": 5,  # recalled (unpinned) memories per turn at most
    "MEMORY_RECALL_MIN_SCORE": 0.15,  # word-overlap score (0..1) a memory needs to be recalled
    "MEMORY_PINNED_LIMIT": 20,  # pinned memories per turn at most
    "MEMORY_MAX_PER_USER": 1000,  # memories one user may keep
    "MEMORY_CONTEXT_CHARS": 6000,  # characters of memory text per turn at most
    "MEMORY_EXTRACT_TIMEOUT": 60.0,  # seconds automatic extraction may take after a turn
    "WEB_CONTEXT_PAGES": 3,  # top search results fetched for a chat turn with use_web
    "WEB_PAGE_CHARS": 4000,  # characters of one page's text injected at most
    "WEB_CONTEXT_CHARS": 12000,  # characters of web text per turn at most
    "WORKSPACE_BROWSE_LIMIT": 500,  # directories one /api/workspace/browse answer lists at most
    # Research jobs (odysseus.research; README "Research"); a request may lower or raise these within bounds
    "RESEARCH_MAX_ROUNDS": 0,  # search rounds per job; 0 = automatic (the model decides, up to RESEARCH_AUTO_ROUNDS)
    "RESEARCH_AUTO_ROUNDS": 6,  # the most rounds an automatic job runs (hard cap 20)
    "RESEARCH_MIN_ROUNDS": 1,  # rounds run before the model may decide to stop
    "RESEARCH_MAX_TIME": 600.0,  # seconds per job (60-3600; also kept under RUN_WALL_TIMEOUT)
    "RESEARCH_WRITE_SHARE": 0.2,  # share of max_time kept for writing the report
    "RESEARCH_QUERIES_PER_ROUND": 3,  # search queries per round
    "RESEARCH_PAGES_PER_ROUND": 5,  # new pages read per round
    "RESEARCH_CHARS_PER_PAGE": 6000,  # characters of a page's text the model reads
    "RESEARCH_CONCURRENT_READS": 3,  # pages read at once
    "RESEARCH_CALL_TIMEOUT": 90.0,  # seconds per model call, before scaling
    "RESEARCH_TIMEOUT_PER_KCHAR": 1.0,  # seconds added per 1000 prompt characters
    "RESEARCH_LOCAL_FACTOR": 3.0,  # call timeouts are multiplied by this for local models (ollama, loopback)
    "RESEARCH_PROGRESS_INTERVAL": 10.0,  # seconds between repeated progress events while a phase waits
    # Accounts (see README "Accounts and single-user mode")
    "AUTH": "password",  # "password": sign-in required; "none": one implicit owner, loopback only
    "AUTH_FORCE": False,  # allow AUTH=none on a non-loopback bind (explicit opt-out)
    "LOCAL_OWNER": "local",  # the implicit owner in AUTH=none before any account exists
    "SECRET_KEY": "",  # signs session cookies; generated once into DATA_DIR/secret_key when empty
    "SESSION_DAYS": 30,  # how long a sign-in lasts
    "TRUST_PROXY": False,  # honour X-Forwarded-For/-Proto/-Host from one reverse proxy (nginx)
    "ALLOWED_ORIGINS": "",  # extra origins (comma-separated) allowed to send cookie-authenticated writes
    "ALLOWED_HOSTS": "",  # extra Host names served in AUTH=none (besides loopback names)
    "LOGIN_FREE_FAILURES": 5,  # failures per account before sign-in is slowed down
    "LOGIN_FREE_FAILURES_ADDRESS": 20,  # failures per client address before it is slowed down
    "LOGIN_BASE_DELAY": 1.0,  # first lock-out in seconds; doubles with every further failure
    "LOGIN_MAX_DELAY": 900.0,  # longest lock-out in seconds
    "LOGIN_FORGET_AFTER": 3600.0,  # seconds without failures after which a key's count is forgotten
}


def _coerce(key: str, raw: str) -> Any:
    default = DEFAULTS.get(key)
    try:
        if isinstance(default, bool):
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError as exc:
        raise OdysseusError(f"ODYSSEUS_{key}={raw!r} is not a valid {type(default).__name__}") from exc
    return raw


def providers_from_env(env: Mapping[str, str]) -> List[ProviderConfig]:
    """Providers named by the conventional variables, in a fixed order."""
    found: List[ProviderConfig] = []
    if env.get("OLLAMA_HOST"):
        host = env["OLLAMA_HOST"]
        if "://" not in host:
            host = "http://" + host
        found.append(ProviderConfig(name="ollama", kind="ollama", base_url=host.rstrip("/"),
                                    default_model=env.get("OLLAMA_MODEL") or None))
    if env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_KEY"):
        found.append(ProviderConfig(name="openai", kind="openai",
                                    base_url=(env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/"),
                                    api_key=env.get("OPENAI_API_KEY") or None,
                                    default_model=env.get("OPENAI_MODEL") or None))
    if env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_BASE_URL"):
        found.append(ProviderConfig(name="anthropic", kind="anthropic",
                                    base_url=(env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com").rstrip("/"),
                                    api_key=env.get("ANTHROPIC_API_KEY") or None,
                                    default_model=env.get("ANTHROPIC_MODEL") or None))
    return found


def providers_from_toml(tables: List[dict]) -> List[ProviderConfig]:
    """Providers from ``[[providers]]`` tables."""
    known = {"name", "kind", "base_url", "api_key", "models", "default_model"}
    result = []
    for table in tables:
        if "kind" not in table:
            raise OdysseusError("each [[providers]] table needs a kind")
        api_key = table.get("api_key")
        if table.get("api_key_env"):
            api_key = os.environ.get(table["api_key_env"], api_key)
        models, windows = model_entries(table.get("models", []))
        options = {k: v for k, v in table.items() if k not in known and k != "api_key_env"}
        if windows:
            options["model_context_length"] = windows  # odysseus.context.window reads it
        result.append(ProviderConfig(
            name=table.get("name", table["kind"]), kind=table["kind"],
            base_url=(table.get("base_url") or None) and table["base_url"].rstrip("/"),
            api_key=api_key, models=models, default_model=table.get("default_model"), options=options,
        ))
    return result


def model_entries(entries: List[Any]) -> tuple:
    """A provider's ``models``: names, or tables ``{name = "...", context_length = N}``; (names, {name: N})."""
    names, windows = [], {}
    for entry in entries:
        if isinstance(entry, dict):
            if not isinstance(entry.get("name"), str) or not entry["name"]:
                raise OdysseusError("a [[providers]] models table needs a name")
            names.append(entry["name"])
            if entry.get("context_length") is not None:
                windows[entry["name"]] = int(entry["context_length"])
        else:
            names.append(entry)
    return names, windows


def load_config(
    env: Optional[Mapping[str, str]] = None, overrides: Optional[Mapping[str, Any]] = None
) -> Dict[str, Any]:
    """Build the flat config dict, including ``PROVIDERS`` (list of ProviderConfig) and ``ROUTES``."""
    env = os.environ if env is None else env
    config: Dict[str, Any] = dict(DEFAULTS)
    toml_providers: List[dict] = []
    routes: Dict[str, List[str]] = {}
    extra: Dict[str, Any] = {}
    path = env.get("ODYSSEUS_CONFIG")
    if path:
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise OdysseusError(f"cannot read ODYSSEUS_CONFIG {path}: {exc}") from exc
        toml_providers = doc.pop("providers", [])
        routes = {name: list(spec.get("candidates", spec) if isinstance(spec, dict) else spec)
                  for name, spec in doc.pop("routes", {}).items()}
        for key, value in doc.items():
            if isinstance(value, dict):
                extra[key] = value  # nested tables (prices, citations, ...) kept as is
                for sub, sub_value in value.items():  # [citations] flag = x -> CITATIONS_FLAG
                    flat = f"{key}_{sub}".upper()
                    if flat in DEFAULTS and not isinstance(sub_value, dict):
                        config[flat] = sub_value
            else:
                config[key.upper()] = value
    for name, raw in env.items():
        if name.startswith("ODYSSEUS_") and name != "ODYSSEUS_CONFIG":
            key = name[len("ODYSSEUS_"):]
            config[key] = _coerce(key, raw)
    config["PROVIDERS"] = providers_from_toml(toml_providers) + [
        p for p in providers_from_env(env) if p.name not in {t.get("name", t["kind"]) for t in toml_providers}
    ]
    config["ROUTES"] = routes
    config["TABLES"] = extra
    if overrides:
        config.update(overrides)
    return config
