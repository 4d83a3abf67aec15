"""The composition root: the one place that builds the app and wires every part, in order.

Each part owns an ``init_app(app)`` (or a blueprint ``bp``) and keeps its per-app state in
``app.extensions["odysseus.*"]``; nothing else in the package assembles parts. The order
matters where a later part uses an earlier one, and each such dependency is stated below.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from flask import Flask

from . import config as config_module
from . import context, core, mcp, openai_api, static_assets
from .context import memories, web_sources, workspace
from .routes import (
    agent_routes,
    auth,
    auth_routes,
    background_routes,
    branch_routes,
    chat_routes,
    code_tools_routes,
    compare_routes,
    document_routes,
    folder_routes,
    history_routes,
    image_routes,
    mcp_routes,
    memory_routes,
    meta_routes,
    page_api,
    page_routes,
    profile_routes,
    prompt_routes,
    provider_routes,
    rating_routes,
    research_routes,
    share_routes,
    upload_routes,
    v1_routes,
    window_routes,
    workflow_routes,
)
from .routes import errors as route_errors
from .routes.params import AsciiIntConverter
from .turns import agent, chat, jobs, research
from .turns import start as turns

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Blueprints that only add routes (the parts with more to wire have an ``init_app`` below).
BLUEPRINTS = (
    chat_routes,
    history_routes,
    meta_routes,
    auth_routes,
    agent_routes,
    background_routes,
    profile_routes,
    memory_routes,
    code_tools_routes,
    page_routes,
    workflow_routes,
    branch_routes,  # regenerate / retry / edit-and-resend branches
    compare_routes,  # keep one reply of a compare
    provider_routes,  # the admin's provider connections
    mcp_routes,  # the admin's MCP servers
    image_routes,  # generated images, for their owner
    research_routes,  # the research job API
    prompt_routes,  # the prompt library (/ commands in the composer)
    rating_routes,  # ratings of replies
    v1_routes,  # the OpenAI-compatible API (/v1), a third projection of the run log
    folder_routes,  # chat folders (issue 36)
    share_routes,  # share links and their public snapshot pages (issue 36)
)


def create_app(test_config: Optional[Mapping[str, Any]] = None) -> Flask:
    """Build the app: configuration, then every part, listed in the order it is wired."""
    app = Flask(
        "odysseus",
        instance_relative_config=False,
        template_folder=os.path.join(_ROOT, "templates"),
        static_folder=os.path.join(_ROOT, "static"),
    )
    app.config.update(config_module.load_config(overrides=test_config))
    app.config["MAX_CONTENT_LENGTH"] = int(app.config["MAX_BODY_BYTES"])

    # 1. Core: store (migrations), accounts, providers/router, the run engine (recovers interrupted runs).
    core.init_app(app)
    # 2. The context pipeline, then its sources in the order their events are announced.
    context.init_app(app)
    for source in (workspace, web_sources, memories):
        source.init_app(app)
    # 3. HTTP: the path converter (before any rule uses <digits:...>), blueprints, who is asking.
    app.url_map.converters["digits"] = AsciiIntConverter
    static_assets.init_app(app)  # /static: fingerprinted URLs, immutable caching, gzip
    for module in BLUEPRINTS:
        app.register_blueprint(module.bp)
    auth.init_app(app)
    # 4. Turns and the parts they use. The turn service first (the modes register into it);
    #    the model's window before background jobs, whose recovered turns use it at once.
    turns.init_app(app)  # the turn service: start_turn, the mode table (odysseus/turns/)
    chat.init_app(app)  # chat mode (compare needs no registration: it never starts a run)
    window_routes.init_app(app)  # context-window sizes, trimming and compaction
    jobs.init_app(app)  # background jobs: the worker pool, recovery of queued jobs
    upload_routes.init_app(app)  # uploads + the attachments and retrieval context sources
    agent.init_app(app)  # agent mode: tools, approvals, images, Agent Alloy workflows
    mcp.init_app(app)  # MCP servers' tools, a source of agent mode's toolbox (after agent mode)
    document_routes.init_app(app)  # editor documents: routes, document tools, active-document context
    research.init_app(app)  # research jobs: mode, job rows
    openai_api.init_app(app)  # the /v1 API's mode and service (after agent mode, whose agents it routes to)
    page_api.init_app(app)  # the page's own API: search, export/import, settings, self-test, titles
    # 5. JSON errors for everything above.
    route_errors.register(app)
    return app
