"""Every configuration key, declared once: name, default, type, one line of help and its guide section.

``odysseus.config.DEFAULTS`` is derived from ``KEYS``; ``odysseus config-table`` prints docs/guide.md's
tables from it (``tests/test_config_keys.py`` fails when docs/guide.md and this module differ). The
type is the default's type unless given; environment values (``ODYSSEUS_<KEY>``) are parsed as it.
``PROCESS_VARIABLES`` are the ``ODYSSEUS_*`` variables read from the environment by gunicorn's
settings and the ``odysseus`` command rather than kept as keys.
"""

from __future__ import annotations

import builtins
import difflib
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

MiB = 1024 * 1024


@dataclass(frozen=True)
class Key:
    """One configuration key."""

    name: str
    default: Any
    help: str
    section: str
    type: Optional[builtins.type] = None  # (the field shadows the builtin inside the class)

    @property
    def kind(self) -> builtins.type:
        """The type environment values are parsed as."""
        return self.type or type(self.default)


# guide section of each key -> the heading the generated table sits under (see config_table)
SECTIONS = {
    "general": "Configuration",
    "runs": "Configuration",
    "process": "Configuration",
    "providers": "Model providers",
    "accounts": "Accounts and single-user mode",
    "uploads": "Uploads, attachments and retrieval",
    "agent": "Agent mode",
    "sandbox": "Code sandbox",
    "mcp": "MCP servers",
    "documents": "Editor documents",
    "context": "Memories, web sources and the agent's workspace",
    "window": "Context window",
    "research": "Research",
    "alloy": "Agent Alloy workflows",
    "api": "OpenAI-compatible API",
}


def _keys(section: str, *rows: Tuple[Any, ...]) -> List[Key]:
    return [Key(row[0], row[1], row[2], section, *row[3:]) for row in rows]


KEYS: List[Key] = [
    *_keys(
        "general",
        ("DATA_DIR", "instance", "where the SQLite file (`odysseus.db`), the secret and workspaces live"),
        ("DATABASE", "", "path of the SQLite file; empty = `DATA_DIR/odysseus.db`"),
        (
            "REQUEST_WRITE_WAIT",
            2.0,
            "seconds a request's write waits for a database another process locked; then a 503 with `Retry-After`",
        ),
        ("MAX_BODY_BYTES", 1 * MiB, "largest request body"),
        (
            "MAX_MESSAGE_CHARS",
            200_000,
            "longest message; the page shows a counter from 80 % and refuses longer ones, keeping the text",
        ),
        ("HISTORY_CONTEXT_MESSAGES", 1000, "newest saved messages a turn's model context is built from"),
        (
            "TITLE_MODE",
            "model",
            "`model`: after a session's first reply ask a model for its title; `first_line`: "
            "never ask, use the clean first line of the message",
        ),
        ("TITLE_MODEL", "", "route for session titles; empty = the model that answered"),
        ("TITLE_TIMEOUT", 20.0, "seconds a title request may take before the first line is used instead"),
        ("DEMO_TOKEN_DELAY", 0.03, "seconds between tokens of the offline demo model"),
    ),
    *_keys(
        "runs",
        ("HEARTBEAT_INTERVAL", 10.0, "seconds of silence before `: heartbeat N`"),
        (
            "SSE_RETRY_MS",
            3000,
            "the `retry:` field in the first frame of every stream (how long `EventSource` waits before reconnecting)",
        ),
        ("MAX_STREAMS_PER_USER", 32, "open SSE streams per user in one worker process; one more is a 429"),
        ("EVICT_GRACE", 180.0, "seconds a finished run stays replayable after its last reader left"),
        ("RUN_MAX_EVENTS", 100_000, "events one run's log may hold"),
        ("RUN_MAX_BYTES", 16 * MiB, "payload bytes one run's log may hold"),
        ("PROCESS_MAX_BYTES", 512 * MiB, "payload bytes of all run logs in one process"),
        ("MAX_ACTIVE_RUNS", 5000, "runs one process keeps at once"),
        ("RUN_WALL_TIMEOUT", 1800.0, "seconds a run may take in all (watchdog)"),
        ("RUN_IDLE_TIMEOUT", 300.0, "seconds a run may go without an event (watchdog)"),
        (
            "EVENT_FLUSH_INTERVAL",
            0.2,
            "seconds between group commits of the durable run log (the most text a crash can lose)",
        ),
        ("DURABLE_EVENTS", True, "write every event through to SQLite (turn off only to benchmark without it)"),
        (
            "RUN_LEASE_SECONDS",
            15.0,
            "a run's lease; a run whose worker stopped renewing it this long is recovered as `interrupted`",
        ),
        (
            "FINAL_SAVE_PATIENCE",
            20.0,
            "seconds a run waits for an unwritable database before ending in memory (the save is retried)",
        ),
        (
            "SHUTDOWN_GRACE",
            20.0,
            "seconds running replies may go on after SIGTERM or a reload before ending `interrupted`",
        ),
        (
            "RUN_BACKEND",
            "memory",
            "`memory`: runs live in the one worker (more are refused); `redis`: several "
            "workers (and boxes) share runs through Redis (docs/deploy.md)",
        ),
        ("REDIS_URL", "", "the Redis server of `RUN_BACKEND=redis` (`redis://host:port/db`)"),
        ("REDIS_PREFIX", "odysseus:", "prefix of every Redis key (two installs may share one Redis server)"),
        ("SESSION_LOCK_SECONDS", 30.0, "expiry of a session's start lock in Redis (a crashed worker frees it)"),
        ("STOP_WAIT", 5.0, "seconds a stop request waits for the run to settle"),
        ("BACKGROUND_WORKERS", 2, "background jobs running at once (per worker process)"),
    ),
    *_keys(
        "providers",
        ("DEFAULT_MODEL", "", "the model or route used when a request names none"),
        ("CONNECT_TIMEOUT", 10.0, "seconds to connect to a provider"),
        ("FIRST_TOKEN_TIMEOUT", 120.0, "seconds from sending the request to the first output"),
        ("IDLE_TIMEOUT", 60.0, "seconds between chunks after the first output"),
        ("MODELS_CACHE_SECONDS", 30.0, "how long `GET /api/models` answers from its cache"),
        ("DEFAULT_MAX_TOKENS", 4096, "`max_tokens` for APIs that require one (Anthropic)"),
    ),
    *_keys(
        "accounts",
        ("AUTH", "password", "`password`: sign-in required; `none`: one implicit owner, loopback only"),
        ("AUTH_FORCE", False, "allow `AUTH=none` on a non-loopback bind (explicit opt-out)"),
        ("LOCAL_OWNER", "local", "the implicit owner in `AUTH=none` before any account exists"),
        ("SECRET_KEY", "", "signs session cookies; generated once into `DATA_DIR/secret_key` when empty"),
        ("SESSION_DAYS", 30, "how long a sign-in lasts (days)"),
        ("SESSION_COOKIE_SECURE", False, "always mark the session cookie `Secure` (it is anyway on https requests)"),
        ("TRUST_PROXY", False, "honour `X-Forwarded-For`/`-Proto`/`-Host` from one reverse proxy (nginx)"),
        ("ALLOWED_ORIGINS", "", "extra origins (comma-separated) allowed to send cookie-authenticated writes"),
        ("ALLOWED_HOSTS", "", "extra `Host` names served in `AUTH=none` (besides loopback names)"),
        ("LOGIN_FREE_FAILURES", 5, "the failed sign-in of one account that first locks it (for `LOGIN_BASE_DELAY`)"),
        ("LOGIN_FREE_FAILURES_ADDRESS", 20, "the failed sign-in from one client address that first locks it"),
        ("LOGIN_BASE_DELAY", 1.0, "first lock-out in seconds; doubles with every further failure"),
        ("LOGIN_MAX_DELAY", 900.0, "longest lock-out in seconds"),
        ("LOGIN_FORGET_AFTER", 3600.0, "seconds without failures after which a count is forgotten"),
    ),
    *_keys(
        "uploads",
        ("UPLOAD_MAX_BYTES", 10 * MiB, "bytes per uploaded file"),
        ("UPLOAD_MAX_FILES", 10, "files per upload request (and attachments per turn)"),
        ("UPLOAD_QUOTA_BYTES", 200 * MiB, "bytes of uploads each user may keep"),
        (
            "EXTRACT_CPU_SECONDS",
            10,
            "CPU seconds reading one PDF's text may take (a child process; past it: text not extracted)",
        ),
        ("EXTRACT_MEMORY_MB", 512, "memory (MiB of address space) reading one PDF's text may use"),
        ("EXTRACT_TIMEOUT", 20.0, "seconds reading one uploaded file's text may take in all"),
        ("EXTRACT_MAX_CHARS", 2_000_000, "characters of text kept from one uploaded file (the rest is cut)"),
        ("ATTACH_TEXT_BUDGET", 24_000, "characters of attached text inlined per turn (shared by all files)"),
        ("VISION_MODELS", "", "comma-separated globs (`provider/model` or `model`) that accept images"),
        ("RAG_CHUNK_CHARS", 1000, "target characters per indexed chunk"),
        ("RAG_CHUNK_OVERLAP", 150, "characters repeated between neighbouring chunks"),
        ("RAG_TOP_K", 4, "chunks retrieved per turn at most"),
        ("RAG_MIN_SCORE", 0.25, "chunks scoring below this (0..1) are not used"),
        ("RAG_MAX_CHARS", 6000, "characters of retrieved text per turn"),
        ("RAG_INDEX_MAX_CHARS", 2_000_000, "characters of one file's text that are indexed"),
        (
            "EMBEDDING_MODEL",
            "",
            "`provider/model` serving embeddings (OpenAI `/v1/embeddings`, Ollama "
            "`/api/embed`); empty = full-text search only",
        ),
        ("EMBEDDING_WEIGHT", 0.5, "share of the vector similarity in the blended score"),
        ("EMBEDDING_TIMEOUT", 30.0, "seconds per embeddings request"),
        ("EMBEDDING_BATCH", 32, "chunks per embeddings request"),
    ),
    *_keys(
        "agent",
        (
            "AGENT_TOOLS",
            "web_search,fetch_url,run_python,shell,generate_image,update_plan,ui_control,present_exhibit,manage_memory",
            "enabled tools (comma-separated)",
        ),
        ("AGENT_APPROVAL_TOOLS", "run_python,shell", "tools that need the user's approval"),
        ("AGENT_MAX_ROUNDS", 10, "model rounds per request before `rounds_exhausted`"),
        ("AGENT_MAX_TOOL_CALLS", 30, "tool calls per request before `budget_exceeded`"),
        ("AGENT_LOOP_REPEATS", 3, "rounds repeating one call with no new text before the loop breaker"),
        ("AGENT_MAX_NUDGES", 2, "intent nudges per request before `intent_nudge_exhausted`"),
        ("AGENT_APPROVAL_TTL", 600.0, "seconds an approval card stays valid"),
        ("AGENT_SYSTEM_PROMPT", "", "replaces the built-in agent system prompt when set"),
        (
            "CITATIONS_AUTO_CAPTURE_WEB_SEARCH",
            True,
            "a passive citation exhibit after `web_search` (TOML `[citations] auto_capture_web_search`)",
        ),
        ("TOOL_TIMEOUT", 60.0, "seconds any tool may run"),
        ("TOOL_PROGRESS_INTERVAL", 1.0, "seconds between `tool_progress` events of a running tool"),
        ("TOOL_OUTPUT_CAP", 20_000, "characters of a tool result the model sees"),
        ("CODE_TIMEOUT", 30.0, "seconds `run_python` / `shell` may run"),
        (
            "TOOL_OUTPUT_MAX_BYTES",
            1 * MiB,
            "bytes of a code tool's output kept; the rest is read and dropped with a marker",
        ),
        ("WEB_SEARCH_BACKEND", "duckduckgo", "`duckduckgo`, `searxng` (with `SEARXNG_URL`) or empty for off"),
        ("SEARXNG_URL", "", "base URL of a SearXNG instance with the JSON format enabled"),
        ("DUCKDUCKGO_URL", "https://html.duckduckgo.com/html/", "the DuckDuckGo HTML endpoint searched"),
        ("WEB_SEARCH_RESULTS", 5, "results one `web_search` call returns"),
        ("FETCH_TIMEOUT", 15.0, "seconds for `fetch_url` (connect + read)"),
        ("FETCH_MAX_BYTES", 2_000_000, "bytes of a page `fetch_url` reads at most"),
        ("FETCH_ALLOW_PRIVATE", False, "let `fetch_url` reach loopback/private/link-local addresses"),
        ("FETCH_ALLOWED_NETWORKS", "", "comma-separated CIDRs `fetch_url` may reach despite the SSRF guard"),
        ("IMAGES_BASE_URL", "", "OpenAI-compatible images endpoint (`…/v1`) for `generate_image`; empty = tool off"),
        ("IMAGES_API_KEY", "", "API key of the images endpoint"),
        ("IMAGES_MODEL", "", "model of the images endpoint"),
        ("IMAGES_TIMEOUT", 120.0, "seconds one image request may take"),
    ),
    *_keys(
        "sandbox",
        ("SANDBOX_BWRAP", "bwrap", "the bubblewrap binary; when it cannot run, code tools are not offered"),
        ("SANDBOX_UID", 65534, "uid the sandbox runs as when the server runs as root"),
        ("SANDBOX_GID", 65534, "gid the sandbox runs as when the server runs as root"),
        ("SANDBOX_CPU_SECONDS", 60, "RLIMIT_CPU per call"),
        ("SANDBOX_MEMORY_BYTES", 1024 * MiB, "RLIMIT_AS per process"),
        ("SANDBOX_MAX_PROCESSES", 64, "RLIMIT_NPROC inside the sandbox"),
        ("SANDBOX_MAX_FILE_BYTES", 64 * MiB, "RLIMIT_FSIZE: largest file a call may write"),
        ("SANDBOX_MAX_OPEN_FILES", 256, "RLIMIT_NOFILE"),
        ("SANDBOX_TMP_BYTES", 64 * MiB, "size of the private `/tmp` (tmpfs)"),
        ("WORKSPACE_MAX_BYTES", 256 * MiB, "bytes one session workspace may hold (each entry counts at least 4 KiB)"),
        ("WORKSPACE_MAX_FILES", 10_000, "files, folders and symlinks one session workspace may hold"),
        ("WORKSPACE_USER_MAX_BYTES", 1024 * MiB, "bytes all of one user's session workspaces may hold together"),
        ("CODE_TOOLS_UNSANDBOXED", False, "single-user mode only: run code tools without bubblewrap"),
    ),
    *_keys(
        "mcp",
        ("MCP_MAX_TOOLS", 64, "tools one MCP server offers the model at most (after its `tools` allow-list)"),
        ("MCP_TIMEOUT", 60.0, "seconds an MCP tool call may take, unless the server's `timeout` says otherwise"),
        ("MCP_START_TIMEOUT", 20.0, "seconds an MCP server may take to start, answer `initialize` and list its tools"),
        ("MCP_RESTART_MAX_DELAY", 60.0, "longest wait between restarts of an MCP server that failed (1 s, doubling)"),
    ),
    *_keys(
        "documents",
        ("DOCUMENT_MAX_BYTES", 1 * MiB, "largest document (UTF-8 bytes); a larger write is refused"),
        ("DOCUMENT_CONTEXT_CHARS", 60_000, "characters of the active document (line-numbered) sent to the model"),
        ("DOCUMENT_FOLD_SECONDS", 60.0, "a user save this soon after the user's previous version replaces it"),
        ("DOCUMENT_PREVIEW_INTERVAL", 0.1, "seconds between `doc_stream_delta` previews, at least"),
    ),
    *_keys(
        "context",
        ("MEMORY_RECALL_LIMIT", 5, "recalled (unpinned) memories per turn at most"),
        ("MEMORY_RECALL_MIN_SCORE", 0.15, "word-overlap score (0..1) a memory needs to be recalled"),
        ("MEMORY_PINNED_LIMIT", 20, "pinned memories per turn at most"),
        ("MEMORY_MAX_PER_USER", 1000, "memories one user may keep"),
        ("MEMORY_CONTEXT_CHARS", 6000, "characters of memory text per turn at most"),
        ("MEMORY_EXTRACT_TIMEOUT", 60.0, "seconds automatic extraction may take after a turn"),
        ("WEB_CONTEXT_PAGES", 3, "top search results fetched for a chat turn with `use_web`"),
        ("WEB_PAGE_CHARS", 4000, "characters of one page's text injected at most"),
        ("WEB_CONTEXT_CHARS", 12000, "characters of web text per turn at most"),
        ("WORKSPACE_BROWSE_LIMIT", 500, "folders one `/api/workspace/browse` answer lists at most"),
    ),
    *_keys(
        "window",
        ("DEFAULT_CONTEXT_WINDOW", 8192, "tokens, for local models that neither config nor the server size"),
        ("DEFAULT_CONTEXT_WINDOW_HOSTED", 128_000, "tokens, for hosted models that neither config nor the server size"),
        ("CONTEXT_WINDOW_CACHE_SECONDS", 600.0, "how long a provider's reported window (or its silence) is kept"),
        ("CONTEXT_WINDOW_PROBE_TIMEOUT", 5.0, "seconds to ask a provider for its window"),
        (
            "REPLY_RESERVE_TOKENS",
            1024,
            "tokens kept free for the reply when the request gives no `max_tokens` (at most a quarter of the window)",
        ),
        (
            "COMPACT_THRESHOLD",
            0.8,
            "share of the window the history may use before its older half is summarised; 0 = never",
        ),
        ("COMPACT_MIN_MESSAGES", 6, "messages a conversation needs before it is compacted"),
        ("COMPACT_TIMEOUT", 60.0, "seconds a summary request may take"),
        ("COMPACT_SUMMARY_TOKENS", 600, "`max_tokens` of a summary"),
        ("COMPACT_MESSAGE_CHARS", 4000, "characters of each message that go into a summary request"),
        ("COMPACT_INPUT_CHARS", 48_000, "characters of transcript a summary request carries at most"),
        ("UTILITY_MODEL", "", "route for summaries; empty = the turn's model"),
    ),
    *_keys(
        "research",
        (
            "RESEARCH_MAX_ROUNDS",
            0,
            "rounds per job, 0–20 (request: `max_rounds`); 0 = automatic (the model "
            "decides, at most `RESEARCH_AUTO_ROUNDS`)",
        ),
        ("RESEARCH_AUTO_ROUNDS", 6, "the most rounds an automatic job runs (hard cap 20)"),
        ("RESEARCH_MIN_ROUNDS", 1, "rounds before the model may stop the job (request: `min_rounds`)"),
        ("RESEARCH_MAX_TIME", 600.0, "seconds per job, 60–3600, kept under `RUN_WALL_TIMEOUT` (request: `max_time`)"),
        ("RESEARCH_WRITE_SHARE", 0.2, "share of `max_time` kept for writing the report"),
        ("RESEARCH_QUERIES_PER_ROUND", 3, "search queries per round"),
        ("RESEARCH_PAGES_PER_ROUND", 5, "new pages read per round, 1–20 (request: `pages_per_round`)"),
        (
            "RESEARCH_CHARS_PER_PAGE",
            6000,
            "characters of a page the model reads, 500–50 000 (request: `chars_per_page`)",
        ),
        ("RESEARCH_CONCURRENT_READS", 3, "pages read at once, 1–8 (request: `concurrent_reads`)"),
        ("RESEARCH_CALL_TIMEOUT", 90.0, "seconds per model call, before scaling"),
        ("RESEARCH_TIMEOUT_PER_KCHAR", 1.0, "seconds added per 1000 prompt characters"),
        ("RESEARCH_LOCAL_FACTOR", 3.0, "call timeouts × this for local models (Ollama, loopback or private base URLs)"),
        ("RESEARCH_PROGRESS_INTERVAL", 10.0, "seconds between repeated progress events while a phase waits"),
    ),
    *_keys(
        "alloy",
        ("ALLOY_MAX_DEPTH", 1, "delegation levels below the supervisor (1-3); 1: specialists cannot delegate"),
        ("ALLOY_MAX_PARALLEL_DELEGATIONS", 3, "delegations of one round running at once"),
        ("ALLOY_DELEGATION_TIMEOUT", 300.0, "seconds one delegation may take"),
        ("ALLOY_DELEGATION_MAX_ROUNDS", 6, "model rounds a specialist gets per delegation"),
    ),
    *_keys(
        "api",
        (
            "API_MAX_OUTPUT_TOKENS",
            262_144,
            "largest `max_output_tokens` / `max_tokens` the OpenAI-compatible API (/v1) accepts; more is a 400",
        ),
    ),
]

#: ``ODYSSEUS_*`` variables that are not keys: read from the environment only (gunicorn.conf.py, the CLI).
PROCESS_VARIABLES: List[Key] = _keys(
    "process",
    ("CONFIG", "", "path of the TOML file (environment only)"),
    (
        "WORKERS",
        "",
        "gunicorn worker processes; empty = 1, or one per core with `RUN_BACKEND=redis` (environment only)",
        int,
    ),
    ("WORKER_CONNECTIONS", 10000, "connections one gevent worker serves (environment only)"),
    ("WORKER_TIMEOUT", 120, "seconds gunicorn waits for a silent worker process (environment only)"),
    ("GRACEFUL_MARGIN", 10, "seconds added to `SHUTDOWN_GRACE` for gunicorn's graceful timeout (environment only)"),
    ("ACCESS_LOG", "", "gunicorn access log file, `-` for stderr; empty = none (environment only)"),
    ("LOG_LEVEL", "info", "gunicorn log level (environment only)"),
)

BY_NAME: Dict[str, Key] = {key.name: key for key in KEYS}
if len(BY_NAME) != len(KEYS):  # pragma: no cover - a declaration mistake, caught at import
    raise RuntimeError("a configuration key is declared twice")
ENV_PREFIX = "ODYSSEUS_"


def defaults() -> Dict[str, Any]:
    """Key -> default, for every declared key (``odysseus.config.DEFAULTS``)."""
    return {key.name: key.default for key in KEYS}


def unknown_variables(env: Iterable[str]) -> List[Tuple[str, Optional[str]]]:
    """``ODYSSEUS_*`` names in ``env`` that are neither keys nor process variables, each with the closest name."""
    known = list(BY_NAME) + [variable.name for variable in PROCESS_VARIABLES]
    found = []
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and name[len(ENV_PREFIX) :] not in known:
            close = difflib.get_close_matches(name[len(ENV_PREFIX) :], known, n=1, cutoff=0.75)
            found.append((name, ENV_PREFIX + close[0] if close else None))
    return found


def _shown(key: Key) -> str:
    value = key.default
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if value == "":
        return "empty"
    if isinstance(value, int) and key.name.endswith("BYTES") and value % MiB == 0:
        return f"{value // MiB} MiB" if value < 1024 * MiB else f"{value // (1024 * MiB)} GiB"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def config_table(section: str) -> str:
    """The markdown table of one section's keys, as docs/guide.md holds it between its marker comments."""
    rows = [key for key in KEYS + PROCESS_VARIABLES if key.section == section]
    lines = ["| key (env `ODYSSEUS_…`) | default | type | meaning |", "|---|---|---|---|"]
    for key in rows:
        lines.append(f"| `{key.name}` | {_shown(key)} | {key.kind.__name__} | {key.help} |")
    return "\n".join(lines) + "\n"


def section_names() -> List[str]:
    """Every section that has keys, in declaration order."""
    seen: List[str] = []
    for key in KEYS + PROCESS_VARIABLES:
        if key.section not in seen:
            seen.append(key.section)
    return seen


BLOCK = re.compile(r"(<!-- config-table: ([a-z]+) -->\n)(.*?)(<!-- /config-table -->)", re.S)


def render_blocks(markdown: str) -> str:
    """``markdown`` with every ``<!-- config-table: SECTION -->`` block refilled from the declarations."""
    return BLOCK.sub(lambda m: m.group(1) + config_table(m.group(2)) + m.group(4), markdown)


def block_sections(markdown: str) -> List[str]:
    """The sections of the config-table blocks in ``markdown``, in order."""
    return [m.group(2) for m in BLOCK.finditer(markdown)]
