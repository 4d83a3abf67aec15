"""UI tools: ``update_plan`` (-> ``plan_update``) and ``ui_control`` (-> ``ui_control``).

Neither changes anything on the server; each turns a validated call into one UI event.
``ui_control`` accepts only the actions in ``UI_ACTIONS``, so the model cannot make the
client do anything it does not already recognise.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from ..events import PLAN_UPDATE, UI_CONTROL, Event
from .registry import Tool, ToolContext, ToolError, ToolResult

PLAN_STATUSES = ("pending", "in_progress", "completed")

#: action -> {argument: allowed values, or None for any non-empty text}. The bundled page
#: (static/js/chat.js ``uiControl``) applies exactly these and ignores anything else.
UI_ACTIONS: Dict[str, Dict[str, Optional[tuple]]] = {
    "set_theme": {"theme": ("light", "dark", "auto")},
    "set_mode": {"mode": ("chat", "agent")},
    "select_model": {"model": None},  # an id from /api/models
    "notify": {"message": None},  # a short toast
    "prefill": {"text": None},  # put into the composer, never sent
    "open_session": {"session_id": None},
}


def update_plan(args: dict, ctx: ToolContext) -> ToolResult:
    """Validate a plan (steps with statuses) and publish it as ``plan_update``."""
    steps = args.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ToolError("steps must be a non-empty list of {step, status}")
    plan = []
    for item in steps[:50]:
        if not isinstance(item, dict) or not isinstance(item.get("step"), str) or not item["step"].strip():
            raise ToolError("each step needs a non-empty 'step' text")
        status = item.get("status", "pending")
        if status not in PLAN_STATUSES:
            raise ToolError(f"status must be one of {', '.join(PLAN_STATUSES)}")
        plan.append({"step": item["step"].strip()[:500], "status": status})
    data = {"steps": plan}
    if isinstance(args.get("explanation"), str) and args["explanation"].strip():
        data["explanation"] = args["explanation"].strip()[:1000]
    done = sum(1 for s in plan if s["status"] == "completed")
    return ToolResult(
        f"Plan updated: {done}/{len(plan)} steps completed.",
        events=[Event(PLAN_UPDATE, {"data": data})],
        meta={"plan": data},
    )


def ui_control(args: dict, ctx: ToolContext) -> ToolResult:
    """Validate a recognised UI action and publish it as ``ui_control``."""
    action = args.get("action")
    if action not in UI_ACTIONS:
        raise ToolError(f"unknown action {action!r}; recognised: {', '.join(UI_ACTIONS)}")
    data: dict = {"action": action}
    for name, allowed in UI_ACTIONS[action].items():
        value = args.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ToolError(f"{action} needs a non-empty '{name}'")
        if allowed is not None and value not in allowed:
            raise ToolError(f"{name} must be one of {', '.join(allowed)}")
        data[name] = value[:2000]
    return ToolResult(f"UI action {action} sent.", events=[Event(UI_CONTROL, {"data": data})])


def ui_tools() -> List[Tool]:
    """The two UI tools."""
    return [
        Tool(
            "update_plan",
            "Publish or update the step-by-step plan shown to the user.",
            {
                "type": "object",
                "properties": {
                    "steps": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "step": {"type": "string"},
                                "status": {"type": "string", "enum": list(PLAN_STATUSES)},
                            },
                            "required": ["step", "status"],
                        },
                    },
                    "explanation": {"type": "string"},
                },
                "required": ["steps"],
            },
            update_plan,
            describe=lambda a: f"update_plan ({len(a.get('steps') or [])} steps)",
        ),
        Tool(
            "ui_control",
            "Ask the user's browser to perform a recognised UI action: " + ", ".join(UI_ACTIONS) + ".",
            {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": list(UI_ACTIONS)},
                    "theme": {"type": "string", "enum": ["light", "dark", "auto"]},
                    "mode": {"type": "string", "enum": ["chat", "agent"]},
                    "model": {"type": "string"},
                    "message": {"type": "string"},
                    "text": {"type": "string"},
                    "session_id": {"type": "string"},
                },
                "required": ["action"],
            },
            ui_control,
            describe=lambda a: f"ui_control {a.get('action')}",
        ),
    ]
