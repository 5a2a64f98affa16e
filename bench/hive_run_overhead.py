"""10. What ``hive run`` adds to one turn, against the agent run directly, each to its exit.

In one run, in alternation (the order rotated every round; 2 warm-up rounds, then 15), each a
fresh process timed from just before its spawn to its exit (``Popen`` to ``wait``), medians:

- claude direct: the real claude CLI (``.peers/bin/claude``; ``$HIVE_REAL_CLAUDE`` overrides)
  run as hive runs it: ``claude --print --output-format stream-json --verbose -- PROMPT``, its
  own session and process group, stdin ``/dev/null``, stdout read to EOF (stderr to a file), in
  the same working directory and environment (the fake Anthropic API's offline environment, a
  fresh HOME each time, as ``offline_claude_env`` makes it).
- claude through hive: ``.venv/bin/hive run PROMPT`` with ``HIVE_CLAUDE_COMMAND`` that binary,
  the same environment and directory.
- ACP direct: claude-agent-acp (``.peers/bin/claude-agent-acp``; ``$HIVE_REAL_ACP``) driven by
  ``_acp.RawAgent``, a bare JSON-RPC driver in this process: ``initialize``, ``session/new``,
  one ``session/prompt``, then SIGINT to its group, as hive does, until the agent has exited.
- ACP through hive: ``hive run PROMPT`` with ``HIVE_RUNTIME=acp`` and ``HIVE_ACP_COMMAND``
  the same agent.
- the floors: the venv's ``python -c "import trio"`` and ``python -c pass``; and, for context,
  ``python -c "import trio, gc; gc.freeze()"``: ``hive run`` freezes what its imports made before
  the turn, which spares it the interpreter's last collections at exit, and this is the floor
  given the same treatment.

added = median(through hive) - median(direct); the target is added <= median(import trio) +
30 ms, from the same run: hive may cost what starting Python and importing Trio costs, and 30 ms
more. For the claude arms, spawn to the first byte of output is shown too: what hive does before
claude starts is paid there, in full, while what it does during the turn overlaps claude's own
work. Everything a sample leaves behind (the agent's own children) is waited for between
samples, outside the timings: every process whose environment has that sample's HOME.

hive's modules are byte-compiled first (``compileall``, into their ``__pycache__``): trio and the
other installed packages were compiled when pip installed them, and an environment with
``PYTHONDONTWRITEBYTECODE=1`` (as this VM's is) would otherwise have hive's own sources compiled
again at every start, which is not what an installed hive does.

15 rounds rather than 9: claude-agent-acp's own time is bimodal (in about a third of runs,
through hive or not, it takes ~300 ms longer before its session is open), and a median of 9 fell
in the slow mode often enough to move "added" by that much.

One fake API (``fixtures/fake_api_control.py``, scenario ``{"mode": "text"}``) serves every
claude. Without the real CLI the claude arms use ``fixtures/fake_claude.py`` (its default turn)
and without the real ACP agent the ACP arms use ``fixtures/acp_agent.py`` (its default turn);
the figures then say so.
"""

from __future__ import annotations

import compileall
import contextlib
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _acp import RawAgent, stop_group
from _common import BIN, PYTHON, Figure, main, scratch, summary

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from fixtures.fake_api_control import (  # noqa: E402
    SERVER,
    fake_api,
    offline_claude_env,
    prepare_claude_home,
)

HIVE = BIN / "hive"
CLAUDE = Path(os.environ.get("HIVE_REAL_CLAUDE") or REPO / ".peers" / "bin" / "claude")
AGENT = Path(os.environ.get("HIVE_REAL_ACP") or REPO / ".peers" / "bin" / "claude-agent-acp")
FAKE_CLAUDE = REPO / "fixtures" / "fake_claude.py"
FAKE_AGENT = REPO / "fixtures" / "acp_agent.py"
WARMUP = 2
ROUNDS = 15
PROMPT = "Say hello."
SCENARIO = {"mode": "text", "text": "Hello from the fake API."}
ALLOWANCE_MS = 30.0
TIMEOUT = 120.0


@contextlib.contextmanager
def clean_environ() -> Iterator[None]:
    """Nothing of this process's environment that could send an agent elsewhere or pick another
    runtime (every child gets its environment from ``offline_claude_env`` over this one)."""
    dropped = {
        k: os.environ.pop(k)
        for k in list(os.environ)
        if k.startswith(("CLAUDE", "ANTHROPIC", "HIVE_", "FAKE_"))
        or k.lower() in ("http_proxy", "https_proxy", "all_proxy")
    }
    try:
        yield
    finally:
        os.environ.update(dropped)


def processes_with(home: Path) -> list[int]:
    """Every process of ours whose environment has ``HOME=home``."""
    needle = b"\0HOME=" + os.fsencode(home) + b"\0"
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry.name}/environ", "rb") as f:
                if needle in b"\0" + f.read() + b"\0":
                    found.append(int(entry.name))
    return found


def wait_gone(home: Path, timeout: float = 15.0) -> None:
    """Until no process of that sample is left (an agent's children outlive it briefly)."""
    deadline = time.monotonic() + timeout
    while left := processes_with(home):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of {home} still running after {timeout} s: {left}")
        time.sleep(0.01)


def spawn_to_exit(
    argv: list[str], env: dict[str, str], cwd: Path, stderr: Path
) -> tuple[float, float, bytes, int]:
    """Spawn ``argv`` (its own session, stdin /dev/null, stderr to a file), read its stdout to EOF,
    wait for it: the seconds from just before the spawn to its first output and to its exit, its
    output, its exit status."""
    chunks: list[bytes] = []
    first = 0.0
    with open(stderr, "wb") as err:
        started = time.perf_counter()
        with subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
            cwd=cwd,
            start_new_session=True,
        ) as process:
            assert process.stdout is not None
            while chunk := os.read(process.stdout.fileno(), 1 << 16):
                if not chunks:
                    first = time.perf_counter()
                chunks.append(chunk)
            status = process.wait(TIMEOUT)
        ended = time.perf_counter()
    return first - started if chunks else float("nan"), ended - started, b"".join(chunks), status


def check_turn(who: str, out: bytes, stderr: Path, status: int) -> None:
    lines = out.splitlines()
    last = json.loads(lines[-1]) if lines else {}
    if status != 0 or last.get("type") != "result" or last.get("is_error"):
        tail = stderr.read_text(errors="replace")[-1500:]
        raise RuntimeError(f"{who}: exit status {status}, last line {lines[-1:]!r}; stderr: {tail}")


Sample = dict[str, float]
"""One sample's timings in seconds: ``exit`` (spawn to exit), and ``first`` (spawn to the first
byte of output) where there is one."""


class Arms:
    """The samples, each a callable taking the sample's fresh HOME."""

    def __init__(self, root: Path, port: int | None) -> None:
        self.root = root
        self.port = port
        self.work = root / "work"
        self.work.mkdir()
        self.stderr = root / "stderr"
        self.claude_real = os.access(CLAUDE, os.X_OK) and port is not None
        self.acp_real = os.access(AGENT, os.X_OK) and port is not None
        if self.claude_real:
            self.claude = CLAUDE
        else:
            self.claude = root / "claude"
            self.claude.write_text(f'#!/bin/sh\nexec {PYTHON} {FAKE_CLAUDE} "$@"\n')
            self.claude.chmod(0o755)
        self.agent = [str(AGENT)] if self.acp_real else [PYTHON, str(FAKE_AGENT)]

    def env(self, home: Path) -> dict[str, str]:
        prepare_claude_home(home)
        if self.port is not None:
            return offline_claude_env(self.port, home)
        return {**os.environ, "HOME": str(home), "FAKE_CLAUDE_MAX_SECONDS": "120"}

    def turn(self, who: str, argv: list[str], env: dict[str, str]) -> Sample:
        first, took, out, status = spawn_to_exit(argv, env, self.work, self.stderr)
        check_turn(who, out, self.stderr, status)
        return {"first": first, "exit": took}

    def claude_direct(self, home: Path) -> Sample:
        argv = [str(self.claude), "--print", "--output-format", "stream-json", "--verbose", "--", PROMPT]
        return self.turn("claude direct", argv, self.env(home))

    def claude_hive(self, home: Path) -> Sample:
        env = {**self.env(home), "HIVE_RUNTIME": "claude", "HIVE_CLAUDE_COMMAND": str(self.claude)}
        return self.turn("claude through hive run", [str(HIVE), "run", PROMPT], env)

    def acp_direct(self, home: Path) -> Sample:
        agent = RawAgent(self.agent, self.env(home), self.work, self.stderr)
        try:
            client = {
                "protocolVersion": 1,
                "clientCapabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            }
            initialized, _ = agent.wait(agent.request("initialize", client))
            _, session = agent.wait(agent.request("session/new", {"cwd": str(self.work), "mcpServers": []}))
            prompt = {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": PROMPT}]}
            _, answer = agent.wait(agent.request("session/prompt", prompt))
            stop_group(agent.process.pid, lambda: agent.process.poll() is not None)  # SIGINT, as hive does
            agent.process.wait(TIMEOUT)
            took = time.perf_counter() - agent.spawned
        finally:
            agent.close()
        if answer.get("stopReason") != "end_turn":
            raise RuntimeError(f"ACP direct: the prompt ended with {answer}")
        return {"first": initialized - agent.spawned, "exit": took}

    def acp_hive(self, home: Path) -> Sample:
        env = {
            **self.env(home),
            "HIVE_RUNTIME": "acp",
            "HIVE_ACP_COMMAND": self.agent[0],
            "HIVE_ACP_ARGS": json.dumps(self.agent[1:]),
        }
        return self.turn("ACP through hive run", [str(HIVE), "run", PROMPT], env)

    def python(self, code: str) -> Callable[[Path], Sample]:
        def once(home: Path) -> Sample:
            _, took, _, status = spawn_to_exit([PYTHON, "-c", code], dict(os.environ), self.work, self.stderr)
            if status:
                raise RuntimeError(f"python -c {code!r}: exit status {status}: {self.stderr.read_text()}")
            return {"exit": took}

        return once


def run() -> list[Figure]:
    compileall.compile_dir(REPO / "hive", quiet=1)
    samples: dict[str, list[float]] = {}
    load_before = os.getloadavg()[0]
    with scratch() as root, clean_environ(), contextlib.ExitStack() as stack:
        api = None
        if SERVER.exists():
            api = stack.enter_context(fake_api(root / "scenario.json", root / "api.jsonl", scenario=SCENARIO))
        arms = Arms(root, api.port if api else None)
        measure: dict[str, Callable[[Path], Sample]] = {
            "claude_direct": arms.claude_direct,
            "claude_hive": arms.claude_hive,
            "acp_direct": arms.acp_direct,
            "acp_hive": arms.acp_hive,
            "import_trio": arms.python("import trio"),
            "pass": arms.python("pass"),
            "import_trio_frozen": arms.python("import trio, gc; gc.freeze()"),
        }
        names = list(measure)
        for round_ in range(WARMUP + ROUNDS):
            shift = round_ % len(names)
            order = names[shift:] + names[:shift]
            if round_ % 2:
                order.reverse()
            for name in order:
                home = root / f"home-{round_}-{name}"
                gc.collect()
                sample = measure[name](home)
                wait_gone(home)
                if round_ >= WARMUP:
                    for what, took in sample.items():
                        samples.setdefault(f"{name}_{what}", []).append(took * 1000)
    load_after = os.getloadavg()[0]
    print(f"  load average {load_before:.2f} at the start, {load_after:.2f} at the end", file=sys.stderr)
    stats = {name: summary(values) for name, values in samples.items()}
    med = {name: s["median"] for name, s in stats.items()}
    allowed = med["import_trio_exit"] + ALLOWANCE_MS
    claude_what = (
        "claude CLI" if arms.claude_real else "fixtures/fake_claude.py (no real claude CLI or fake API)"
    )
    acp_what = (
        "claude-agent-acp" if arms.acp_real else "fixtures/acp_agent.py (no claude-agent-acp or fake API)"
    )
    if not (arms.claude_real and arms.acp_real):
        print(f"  fallback: claude arm on {claude_what}; ACP arm on {acp_what}", file=sys.stderr)
    extra = {
        "claude": str(arms.claude),
        "agent": arms.agent,
        "real_claude": arms.claude_real,
        "real_acp": arms.acp_real,
        "allowance_ms": ALLOWANCE_MS,
        "load_average_1min": [load_before, load_after],
        "medians_ms": med,
        "stats_ms": stats,
        "samples_ms": samples,
    }
    bound = f"import trio + {ALLOWANCE_MS:.0f} ms"
    claude_added = med["claude_hive_exit"] - med["claude_direct_exit"]
    acp_added = med["acp_hive_exit"] - med["acp_direct_exit"]
    return [
        Figure("10 hive run overhead", f"{claude_what}, one turn to exit: hive run {med['claude_hive_exit']:.0f} - direct {med['claude_direct_exit']:.0f} ms = added",
               claude_added, "ms", allowed, bound, "<= 1x", extra),
        Figure("10 hive run overhead", f"{claude_what}: spawn → first output, hive run - direct ({med['claude_hive_first']:.0f} - {med['claude_direct_first']:.0f} ms)",
               med["claude_hive_first"] - med["claude_direct_first"], "ms", allowed, bound),
        Figure("10 hive run overhead", f"{acp_what}, one turn to exit: hive run {med['acp_hive_exit']:.0f} - bare driver {med['acp_direct_exit']:.0f} ms = added",
               acp_added, "ms", allowed, bound, "<= 1x"),
        Figure("10 hive run overhead", "floor: `python -c \"import trio\"` / `python -c pass`", med["import_trio_exit"],
               "ms", med["pass_exit"], "python -c pass"),
        Figure("10 hive run overhead", "context: `python -c \"import trio, gc; gc.freeze()\"` / `python -c \"import trio\"`",
               med["import_trio_frozen_exit"], "ms", med["import_trio_exit"], "import trio"),
    ]  # fmt: skip


if __name__ == "__main__":
    main(run)
