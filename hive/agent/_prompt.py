"""A turn's prompt: the messages it carries, oldest first, each marked with who it is from."""

from __future__ import annotations

from collections.abc import Sequence

from hive.agent._model import Item, ItemKind

_WHAT = {ItemKind.WAKE: "wake", ItemKind.PROMPT: "message"}


def render_prompt(items: Sequence[Item], item_limit: int) -> str:
    """The prompt carrying ``items``: a ``[wake from bash-task-ab12]`` (or ``[message from
    operator]``) line, then its text, for each. A text longer than ``item_limit`` bytes is cut
    there, saying so (a turn's prompt must fit the agent's command line on claude)."""
    parts = []
    for item in items:
        parts.append(f"[{_WHAT[item.kind]} from {item.sender}]\n{_cut(item.body, item_limit)}")
    return "\n\n".join(parts)


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode(errors="ignore")
    return f"{kept}\n[... {len(data) - len(kept.encode())} more bytes cut: the message was too long]"
