"""How hive answers an agent's ``session/request_permission``: ``Config.permission``, the same
policy the claude backend passes as its permission mode."""

from __future__ import annotations

from hive.acp._schema import (
    CancelledOutcome,
    JsonObject,
    PermissionOption,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SelectedOutcome,
)
from hive.runtime import Config, Permission

EDIT_KINDS = frozenset({"read", "edit", "delete", "move", "search"})
"""ACP tool kinds that work on files, which ``accept_edits`` allows."""
ALLOW = ("allow_once", "allow_always")
REJECT = ("reject_once", "reject_always")


def tool_call_name(tool_call: JsonObject) -> str | None:
    """The tool's name as claude writes it (``_meta.<vendor>.toolName``, else ``name``)."""
    meta = tool_call.get("_meta")
    if isinstance(meta, dict):
        for vendor in meta.values():
            if isinstance(vendor, dict) and isinstance(vendor.get("toolName"), str):
                return str(vendor["toolName"])
    name = tool_call.get("name")
    return name if isinstance(name, str) else None


def allowed_by_config(name: str | None, config: Config) -> bool:
    """Whether ``config`` allows the tool under every policy (as claude's ``--allowedTools``)."""
    if name is None:
        return False
    if name in config.allowed_tools:
        return True
    return any(
        server.allow_all_tools and (name == f"mcp__{server.name}" or name.startswith(f"mcp__{server.name}__"))
        for server in config.mcp_servers
    )


def answer_permission(
    request: RequestPermissionRequest, config: Config, *, cancelling: bool
) -> RequestPermissionResponse:
    """The answer to one permission request: ``cancelled`` while the turn is being cancelled
    (the protocol requires it), else the option the policy picks."""
    if cancelling:
        return RequestPermissionResponse(CancelledOutcome())
    tool = request.tool_call
    if allowed_by_config(tool_call_name(tool), config) or config.permission is Permission.ALLOW:
        allow = True
    elif config.permission is Permission.ACCEPT_EDITS:
        allow = tool.get("kind") in EDIT_KINDS
    else:
        allow = False
    choice = _option(request.options, ALLOW if allow else REJECT)
    return RequestPermissionResponse(
        CancelledOutcome() if choice is None else SelectedOutcome(choice.option_id)
    )


def _option(options: list[PermissionOption], kinds: tuple[str, ...]) -> PermissionOption | None:
    by_kind = {option.kind: option for option in reversed(options)}
    return next((by_kind[kind] for kind in kinds if kind in by_kind), None)
