"""UI tools: ``update_plan`` (-> ``plan_update``) and ``ui_control`` (-> ``ui_control``).

Neither changes anything on the server; each turns a validated call into one UI event.
``ui_control`` accepts only the actions in ``UI_ACTIONS``, so the model cannot make the
client do anything it does not already recognise.
"""

from __future__ import annotations

from typing import Dict, List

from ..events import Event
from .registry import Tool, ToolContext, ToolError, ToolResult

PLAN_STATUSES = ("pending", "in_progress", "completed")

#: action -> the argument names it takes. The browser applies exactly these.
UI_ACTIONS: Dict[str, List[str]] = {
    "open_panel": ["panel"],  # panel: "plan", "sources", "settings", "files"
    "close_panel": ["panel"],
    "scroll_to_bottom": [],
    "focus_input": [],
    "set_input": ["text"],  # prefill the message box (never sends)
    "show_notice": ["text"],  # a transient notice
}
PANELS = ("plan", "sources", "settings", "files")


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
    return ToolResult(f"Plan updated: {done}/{len(plan)} steps completed.", events=[Event("plan_update", {"data": data})],
                      meta={"plan": data})


def ui_control(args: dict, ctx: ToolContext) -> ToolResult:
    """Validate a recognised UI action and publish it as ``ui_control``."""
    action = args.get("action")
    if action not in UI_ACTIONS:
        raise ToolError(f"unknown action {action!r}; recognised: {', '.join(UI_ACTIONS)}")
    data: dict = {"action": action}
    for name in UI_ACTIONS[action]:
        value = args.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ToolError(f"{action} needs a non-empty '{name}'")
        if name == "panel" and value not in PANELS:
            raise ToolError(f"panel must be one of {', '.join(PANELS)}")
        data[name] = value[:2000]
    return ToolResult(f"UI action {action} sent.", events=[Event("ui_control", {"data": data})])


def ui_tools() -> List[Tool]:
    """The two UI tools."""
    return [
        Tool("update_plan", "Publish or update the step-by-step plan shown to the user.",
             {"type": "object", "properties": {
                 "steps": {"type": "array", "items": {"type": "object", "properties": {
                     "step": {"type": "string"}, "status": {"type": "string", "enum": list(PLAN_STATUSES)}},
                     "required": ["step", "status"]}},
                 "explanation": {"type": "string"}}, "required": ["steps"]},
             update_plan, describe=lambda a: f"update_plan ({len(a.get('steps') or [])} steps)"),
        Tool("ui_control", "Ask the user's browser to perform a recognised UI action: "
             + ", ".join(UI_ACTIONS) + ".",
             {"type": "object", "properties": {
                 "action": {"type": "string", "enum": list(UI_ACTIONS)},
                 "panel": {"type": "string", "enum": list(PANELS)}, "text": {"type": "string"}},
              "required": ["action"]},
             ui_control, describe=lambda a: f"ui_control {a.get('action')}"),
    ]
