"""The pages of ``hive web``: HTML with their style and script inline (nothing is fetched from
anywhere else), rendered whole by the server and kept live by the script (server-sent events
that carry the same fragments, rendered by the same functions: a page without script still
shows the fleet as it was when it loaded)."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

from hive._when import clock, counted, span
from hive.fleet._survey import AgentView

STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.3em;margin:0 0 .8em}a{color:#0550ae;text-decoration:none}a:hover{text-decoration:underline}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px #0002}
th,td{padding:.35em .7em;text-align:left;border-bottom:1px solid #eee;white-space:nowrap}
th{background:#f0f0f0;font-weight:600}
.bar{display:inline-block;width:80px;height:8px;background:#e4e4e4;border-radius:4px;vertical-align:middle}
.bar span{display:block;height:100%;border-radius:4px;background:#2da44e}
.bar.high span{background:#cf222e}.bar.mid span{background:#bf8700}
.running{color:#1a7f37}.stopped{color:#888}.answering{color:#cf222e}
pre{background:#fff;padding:1em;box-shadow:0 1px 2px #0002;max-height:50vh;overflow:auto;white-space:pre-wrap}
#agent table{float:right;margin-left:1.5em}
form{display:inline}textarea{width:40em;height:4em}.muted{color:#888}
section{margin:1.2em 0}
"""

LIVE = """
// The page's stream, open only while the page is shown: a hidden page, or one kept in the
// back/forward cache, lets its connection go (a browser opens six to a server over HTTP/1.1,
// and each stream holds one), and opens a new one when it is shown again.
function live(url, handlers) {
  let source = null;
  const open = () => {
    if (source !== null || document.visibilityState === "hidden") return;
    source = new EventSource(url);
    for (const [name, handle] of Object.entries(handlers)) source.addEventListener(name, handle);
  };
  const close = () => {
    if (source !== null) source.close();
    source = null;
  };
  addEventListener("pagehide", close);
  addEventListener("pageshow", open);
  document.addEventListener("visibilitychange", () => (document.visibilityState === "hidden" ? close : open)());
  open();
}
"""


def _cell_doing(view: AgentView, now: float) -> str:
    if view.state is None:
        return "-"
    if view.state in ("turn", "compacting") and view.since is not None:
        return f"{view.state} {view.turn} for {span(now - view.since)}"
    return view.state


def _bar(view: AgentView) -> str:
    fraction = view.context_fraction
    if fraction is None:
        return '<span class="muted">-</span>'
    level = "high" if fraction > 0.8 else "mid" if fraction > 0.5 else ""
    return (
        f'<span class="bar {level}" title="{view.context_used:,} of {view.context_size:,} tokens">'
        f'<span style="width:{min(100, fraction * 100):.0f}%"></span></span> {fraction:.0%}'
    )


def _chart(history: list[dict[str, Any]]) -> str:
    """Tokens (bars) and cost (line) of the last turns, as a small SVG."""
    if not history:
        return '<span class="muted">no turns yet</span>'
    width, height = 150, 28
    step = width / max(1, len(history))
    most = max((p["tokens"] for p in history), default=0) or 1
    costliest = max((p["cost"] for p in history), default=0) or 1
    bars = "".join(
        f'<rect x="{i * step:.1f}" y="{height - p["tokens"] / most * height:.1f}" width="{max(1.0, step - 1):.1f}" '
        f'height="{p["tokens"] / most * height:.1f}" fill="#9ec5fe"><title>turn {p["turn"]}: {p["tokens"]:,} tokens, '
        f"${p['cost']:.4f}</title></rect>"
        for i, p in enumerate(history)
    )
    points = " ".join(
        f"{i * step + step / 2:.1f},{height - p['cost'] / costliest * (height - 2) - 1:.1f}"
        for i, p in enumerate(history)
    )
    tokens = sum(p["tokens"] for p in history)
    cost = sum(p["cost"] for p in history)
    return (
        f'<svg width="{width}" height="{height}" role="img" aria-label="{tokens:,} tokens, ${cost:.2f} over '
        f'{counted(len(history), "turn")}">{bars}<polyline points="{points}" fill="none" stroke="#cf222e" stroke-width="1"/></svg>'
        f' <span class="muted">{tokens:,} tok, ${cost:.2f}</span>'
    )


def fleet_rows(agents: list[dict[str, Any]], now: float) -> str:
    """The table's rows for the agents (as `hive.fleet._web` sends them: views with ``history``)."""
    rows = []
    for data in agents:
        view = AgentView(**{k: v for k, v in data.items() if k != "history"})
        last = "-"
        if view.last_outcome is not None:
            last = view.last_outcome + (f" at {clock(view.last_ended, now)}" if view.last_ended else "")
            if view.last_error:
                last += f": {view.last_error[:80]}"
        harness_class = {"running": "running", "stopped": "stopped"}.get(view.harness, "answering")
        if view.down:
            harness_class = "answering"
        rows.append(
            f'<tr data-agent="{escape(view.name)}"><td><a href="/agent/{_url(view.name)}">{escape(view.name)}</a></td>'
            f'<td class="{harness_class}">{escape(view.harness_says)}</td><td>{escape(_cell_doing(view, now))}</td>'
            f"<td>{view.queued}</td><td>{_bar(view)}</td><td>{escape(view.session_start)}</td>"
            f"<td>{view.tasks_running}</td><td>{view.loose_ends}</td>"
            f"<td>{view.subagents_running}</td><td>{escape(last)}</td><td>{_chart(data.get('history', []))}</td></tr>"
        )
    return "".join(rows) or '<tr><td colspan="11" class="muted">no agents found</td></tr>'


def fleet_page(agents: list[dict[str, Any]], now: float) -> str:
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>hive fleet</title>
<style>{STYLE}</style></head><body>
<h1>hive: the fleet <span class="muted" id="updated">({counted(len(agents), "agent")})</span></h1>
<table><thead><tr><th>agent</th><th>harness</th><th>doing</th><th>queue</th><th>context</th><th>session</th>
<th>tasks</th><th>loose ends</th><th>subagents</th><th>last turn</th><th>last 50 turns: tokens, cost</th></tr></thead>
<tbody id="fleet">{fleet_rows(agents, now)}</tbody></table>
<script>{LIVE}
live("/events", {{
  fleet: e => {{
    const data = JSON.parse(e.data);
    document.getElementById("fleet").innerHTML = data.rows;
    document.getElementById("updated").textContent = "(" + data.agents.length + (data.agents.length === 1 ? " agent" : " agents") + ", live)";
  }},
}});
</script></body></html>"""


def _url(name: str) -> str:
    """``name`` as a path segment of a URL in an HTML attribute."""
    return escape(quote(name, safe=""))


def agent_page(
    view: AgentView,
    log: list[str],
    tasks: list[dict[str, Any]],
    found: dict[str, list[dict[str, Any]]],
    now: float,
) -> str:
    name = escape(view.name)
    url = _url(view.name)
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>hive: {name}</title>
<style>{STYLE}</style></head><body>
<h1><a href="/">fleet</a> / {name}</h1>
<div id="agent">{agent_summary(view, now)}</div>
<section><form method="post" action="/agent/{url}/prompt"><textarea name="text" placeholder="a message for the next turn"></textarea>
<button type="submit" id="send">send</button></form>
<form method="post" action="/agent/{url}/compact"><button type="submit">compact</button></form></section>
<section><h2>turns</h2><pre id="log">{escape(chr(10).join(log))}</pre></section>
<section><h2>running tasks</h2><div id="tasks">{task_list(view.name, tasks)}</div></section>
<section id="others">{others(found)}</section>
<script>{LIVE}
const log = document.getElementById("log");
const show = lines => {{ log.textContent += lines.join("\\n") + "\\n"; log.scrollTop = log.scrollHeight; }};
// The forms post in the background: the page stays, and the turn they start comes live.
document.addEventListener("submit", event => {{
  const form = event.target;
  event.preventDefault();
  fetch(form.action, {{method: "POST", body: new URLSearchParams(new FormData(form))}})
    .then(r => r.ok ? form.reset() : r.text().then(text => alert(text)));
}});
live("/agent/{url}/events", {{
  reset: e => {{ log.textContent = ""; show(JSON.parse(e.data)); }},
  log: e => show(JSON.parse(e.data)),
  agent: e => {{
    const data = JSON.parse(e.data);
    document.getElementById("agent").innerHTML = data.summary;
    document.getElementById("tasks").innerHTML = data.task_list;
    document.getElementById("others").innerHTML = data.others;
  }},
}});
</script></body></html>"""


def agent_summary(view: AgentView, now: float) -> str:
    facts = [
        ("harness", view.harness_says),
        ("doing", _cell_doing(view, now)),
        ("queued", str(view.queued)),
        ("session", view.session_id or "-"),
        ("loose ends", str(view.loose_ends)),
        ("subagents running", str(view.subagents_running)),
    ]
    if view.refused:
        facts.insert(1, ("not asked", view.refused))
    cells = "".join(f"<tr><th>{k}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    return f"<table>{cells}<tr><th>context</th><td>{_bar(view)}</td></tr></table>"


def others(found: dict[str, list[dict[str, Any]]]) -> str:
    """Its loose ends and its subagents."""
    ends = "".join(
        f"<li><b>{escape(e['task'])}</b> <code>{escape(e['cmd'][:120])}</code>"
        f"{' (ended; its wake waits to be acknowledged)' if e['told'] else ''}</li>"
        for e in found.get("loose_ends", [])
    )
    subs = "".join(
        f"<li><b>{escape(s['name'])}</b> ({escape(s['backend'])}) {counted(s['turns'], 'turn')}"
        f"{', in a turn' if s['running'] else ''}</li>"
        for s in found.get("subagents", [])
    )
    none = '<p class="muted">none</p>'
    return (
        f"<h2>loose ends</h2>{f'<ul>{ends}</ul>' if ends else none}"
        f"<h2>subagents</h2>{f'<ul>{subs}</ul>' if subs else none}"
    )


def task_list(name: str, tasks: list[dict[str, Any]]) -> str:
    if not tasks:
        return '<p class="muted">none</p>'
    parts = []
    for task in tasks:
        tid = escape(task["id"])
        parts.append(
            f'<div class="task" data-task="{tid}"><b>{tid}</b> {escape(task["state"])} <code>{escape(task["cmd"][:200])}</code> '
            f'<form method="post" action="/agent/{_url(name)}/tasks/{_url(task["id"])}/stop"><button type="submit">stop</button></form>'
            f"<pre>{escape(task['stdout'][-2000:])}</pre></div>"
        )
    return "".join(parts)
