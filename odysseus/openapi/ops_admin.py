"""Operations of accounts, the page's features, provider connections, the code tools and meta."""

from __future__ import annotations

from typing import List

from .schemas import BOOL, CREDENTIALS, ID, INT, MCP_SERVER, NULLABLE_STR, OBJ, Op, PAGE, PROVIDER, STR

ADMIN_OPERATIONS: List[Op] = [
    # accounts
    Op("GET", "/api/auth/status", "Who is signed in, the mode and the CSRF token.", "auth", public=True),
    Op("POST", "/api/auth/setup", "Create the first (admin) account.", "auth", CREDENTIALS, public=True),
    Op("POST", "/api/auth/login", "Sign in (sets the session cookie).", "auth", CREDENTIALS, public=True),
    Op("POST", "/api/auth/signup", "Create an account when sign-up is open.", "auth", CREDENTIALS, public=True),
    Op(
        "POST",
        "/api/auth/logout",
        "Sign out (everywhere: end every session).",
        "auth",
        {"everywhere": BOOL},
        public=True,
    ),
    Op("POST", "/api/auth/password", "Change the password.", "auth", {"current_password": STR, "new_password": STR}),
    Op("GET", "/api/auth/tokens", "The caller's API tokens.", "auth"),
    Op(
        "POST", "/api/auth/tokens", "Create an API token (the secret is shown once).", "auth", {"name": STR}, status=201
    ),
    Op("DELETE", "/api/auth/tokens/<token_id>", "Revoke an API token.", "auth"),
    Op("GET", "/api/auth/users", "Every account (admin).", "auth"),
    Op("POST", "/api/auth/users", "Create an account (admin).", "auth", {**CREDENTIALS, "is_admin": BOOL}, status=201),
    Op("GET", "/api/auth/settings", "Instance settings (admin).", "auth"),
    Op("POST", "/api/auth/settings", "Change instance settings (admin).", "auth", {"allow_signup": BOOL}),
    # the page's features (issue #20)
    Op(
        "GET",
        "/api/search",
        "Search the caller's messages (every word, as a prefix).",
        "history",
        query=(("q", {"type": "string", "minLength": 1, "maxLength": 500}),) + PAGE,
    ),
    Op(
        "GET",
        "/api/sessions/<session_id>/export",
        "Download a chat as Markdown or JSON (importable).",
        "history",
        query=(("format", {"type": "string", "enum": ["md", "json"]}),),
    ),
    Op(
        "POST",
        "/api/sessions/import",
        "Create a chat from a JSON export (refused whole on bad input).",
        "history",
        {"format": STR, "version": INT, "session": OBJ, "messages": {"type": "array", "items": OBJ}},
        ("format", "version", "session", "messages"),
        status=201,
    ),
    Op("GET", "/api/user/settings", "The caller's settings and the page's limits.", "settings"),
    Op(
        "PATCH",
        "/api/user/settings",
        "Change some of the caller's settings (null resets one).",
        "settings",
        {
            "default_model": NULLABLE_STR,
            "default_mode": {"type": ["string", "null"], "enum": ["chat", "agent", None]},
            "system_prompt": NULLABLE_STR,
            "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
            "theme": {"type": ["string", "null"], "enum": ["auto", "light", "dark", None]},
            "memory_enabled": {"type": ["boolean", "null"]},
        },
    ),
    Op("GET", "/api/admin/users", "Every account with its admin flag and disabled state (admin).", "settings"),
    Op("GET", "/api/admin/ratings", "Every user's ratings of replies, counted per model (admin).", "settings"),
    Op(
        "PATCH",
        "/api/admin/users/<user_id>",
        "Set an account's admin flag or disable it (admin).",
        "settings",
        {"is_admin": BOOL, "disabled": BOOL},
    ),
    Op(
        "POST",
        "/api/admin/users/<user_id>/password",
        "Set an account's password (admin).",
        "settings",
        {"new_password": STR},
        ("new_password",),
    ),
    # provider connections (admin; keys are write-only: answers carry api_key_last4 only)
    Op(
        "GET",
        "/api/admin/providers",
        "Every provider: the configuration's (read-only) and the stored ones (admin).",
        "settings",
    ),
    Op(
        "POST",
        "/api/admin/providers",
        "Store a provider connection (admin).",
        "settings",
        PROVIDER,
        ("name", "kind"),
        status=201,
    ),
    Op(
        "PATCH",
        "/api/admin/providers/<provider_id>",
        'Change a stored provider; no api_key keeps the key, "" clears it (admin).',
        "settings",
        PROVIDER,
    ),
    Op("DELETE", "/api/admin/providers/<provider_id>", "Remove a stored provider (admin).", "settings"),
    Op(
        "POST",
        "/api/admin/providers/<provider_id>/test",
        "Send one token through a saved provider (admin).",
        "settings",
        {"model": ID},
    ),
    Op(
        "POST",
        "/api/admin/providers/test",
        "Send one token with unsaved values; id fills in a saved key (admin).",
        "settings",
        {**PROVIDER, "id": ID, "model": ID},
        ("name", "kind"),
    ),
    # MCP servers (admin; header and env values are write-only: answers carry their last four characters)
    Op(
        "GET",
        "/api/admin/mcp-servers",
        "Every MCP server with its state: the configuration's (read-only) and the stored ones (admin).",
        "settings",
    ),
    Op("POST", "/api/admin/mcp-servers", "Store an MCP server (admin).", "settings", MCP_SERVER, ("name",), status=201),
    Op(
        "PATCH",
        "/api/admin/mcp-servers/<name>",
        "Change a stored MCP server; a null header or env value keeps the stored one (admin).",
        "settings",
        MCP_SERVER,
    ),
    Op("DELETE", "/api/admin/mcp-servers/<name>", "Remove a stored MCP server (admin).", "settings"),
    Op(
        "POST",
        "/api/admin/mcp-servers/<name>/test",
        "Connect to an MCP server afresh, initialize and list its tools (admin).",
        "settings",
    ),
    Op(
        "GET",
        "/api/diagnostics/stream",
        "Streaming self-test: timestamped frames at known intervals.",
        "meta",
        query=(
            ("count", {"type": "integer", "minimum": 2, "maximum": 10}),
            ("interval_ms", {"type": "integer", "minimum": 50, "maximum": 1000}),
        ),
        stream=True,
        public=True,
    ),
    # code tools: the sandbox status and who may use run_python / shell
    Op("GET", "/api/code-tools", "The code sandbox's status and whether the caller may use the code tools.", "auth"),
    Op("GET", "/api/admin/code-tools", "The code sandbox's status and every code-tools setting (admin).", "auth"),
    Op(
        "PATCH",
        "/api/admin/users/<user_id>/code-tools",
        "Allow or refuse the code tools for one user (admin).",
        "auth",
        {"code_tools": BOOL},
        ("code_tools",),
    ),
    Op(
        "PATCH",
        "/api/admin/profiles/<profile_id>/code-tools",
        "Set a profile's code tools (null: the user's setting) and sandbox network (admin).",
        "auth",
        {"code_tools": {"type": ["boolean", "null"]}, "network": BOOL},
    ),
    # meta
    Op("GET", "/api/images/<name>", "An image the agent generated (its owner only).", "agent"),
    Op(
        "GET",
        "/api/health",
        "Liveness, engine counters, whether the code tools work (and why not), the MCP servers' states.",
        "meta",
        public=True,
    ),
    Op("GET", "/api/models", "The configured models and routes.", "meta", query=(("refresh", STR),)),
    Op("GET", "/api/openapi.json", "This description.", "meta", public=True),
]
