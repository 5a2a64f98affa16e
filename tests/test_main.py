"""The one process boundary (``hive._main.run_main``), the error family under ``HiveError``, and
each program's ``main()`` going through that boundary: all in-process."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib
import inspect
import io
import logging
import os
import pkgutil
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import hive
from hive._main import describe, exit_code_of, run_main
from hive.errors import BadInput, HiveError, StateBusy, leaves

# -- run_main over any tree of exceptions -----------------------------------------------------------

messages = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30).map(
    lambda text: f"what to do: {text}"
)
expected_leaves: st.SearchStrategy[BaseException] = st.one_of(
    st.builds(HiveError, messages),
    st.builds(BadInput, messages),
    st.builds(StateBusy, messages),
    st.builds(
        OSError, st.sampled_from([errno.ENOENT, errno.EACCES, errno.ENOSPC, errno.ECONNREFUSED]), messages
    ),
)
unexpected_leaves: st.SearchStrategy[BaseException] = st.one_of(
    st.builds(TypeError, messages),
    st.builds(ValueError, messages),
    st.builds(LookupError, messages),
    st.builds(OSError, st.sampled_from([errno.EBADF, errno.EINVAL]), messages),
    st.builds(OSError, messages),  # no errno: a bug's, not the world's
)
interrupts: st.SearchStrategy[BaseException] = st.builds(KeyboardInterrupt)


def _grouped(children: list[BaseException]) -> BaseException:
    return BaseExceptionGroup("several", children)  # an ExceptionGroup when none is a KeyboardInterrupt


trees = st.recursive(
    expected_leaves | unexpected_leaves | interrupts,
    lambda inner: st.lists(inner, min_size=1, max_size=4).map(_grouped),
    max_leaves=12,
)


def _raising(exc: BaseException) -> Callable[[], int]:
    def body() -> int:
        raise exc

    return body


def _expected(leaf: BaseException) -> bool:
    return not isinstance(leaf, KeyboardInterrupt) and exit_code_of(leaf) is not None


@given(trees, st.sampled_from([None, 0, 130]))
def test_every_expected_leaf_is_told_and_the_status_follows_the_table(
    tree: BaseException, interrupted: int | None
) -> None:
    found = list(leaves(tree))
    told = [f"prog: {describe(leaf)}" for leaf in found if _expected(leaf)]
    codes = [code for leaf in found if _expected(leaf) and (code := exit_code_of(leaf)) is not None]
    bugs = [leaf for leaf in found if not _expected(leaf) and not isinstance(leaf, KeyboardInterrupt)]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            status = run_main("prog", _raising(tree), interrupted=interrupted)
        except BaseException as raised:
            assert raised is tree  # re-raised whole, with its traceback
            assert raised.__traceback__ is not None
            assert bugs or (not codes and interrupted is None)
        else:
            assert not bugs
            assert status == (max(codes) if codes else interrupted)
    assert stderr.getvalue().splitlines() == told  # each one on a line of its own, in order


@given(expected_leaves)
def test_an_expected_error_is_one_line_without_errno_noise(leaf: BaseException) -> None:
    line = describe(leaf)
    assert "\n" not in line and "[Errno" not in line
    assert line.startswith("what to do:")


def test_the_exit_code_table() -> None:
    from hive._files import NotADirectory
    from hive._unix import NotASocket, SocketInUse, SocketPathTooLong
    from hive.agent import OptionsError, PreviousStillRunning
    from hive.bash import BashError, DaemonUnavailable
    from hive.runtime import AgentRefused, AgentUnavailable, SessionNotFound, SpecError, TurnFailed

    assert run_main("prog", lambda: None) == 0
    assert run_main("prog", lambda: 1) == 1
    for failure in (HiveError("x"), BashError("x"), DaemonUnavailable("x"), FileNotFoundError(2, "x")):
        assert exit_code_of(failure) == 1, failure
    could_not_run = [
        BadInput("x"),
        StateBusy("x"),
        OptionsError("x"),
        SpecError("HIVE_RUNTIME", "x"),
        AgentUnavailable("x"),
        AgentRefused("x"),
        SessionNotFound("x"),
        TurnFailed("x"),
        SocketInUse(errno.EADDRINUSE, "x"),
        NotASocket(errno.EEXIST, "x"),
        SocketPathTooLong("x"),
        NotADirectory(errno.ENOTDIR, "x"),
        PreviousStillRunning("x"),
    ]
    for bad in could_not_run:
        assert exit_code_of(bad) == 2, bad
    with pytest.raises(SystemExit) as usage:  # argparse's: untouched
        run_main("prog", _raising(SystemExit(2)))
    assert usage.value.code == 2


def test_an_oserror_is_told_by_its_words_and_its_path() -> None:
    assert describe(PermissionError(errno.EACCES, "Permission denied", "/x")) == "/x: Permission denied"
    assert describe(OSError(errno.ENOSPC, "cannot write /x: no space")) == "cannot write /x: no space"
    assert describe(HiveError("two\n  lines")) == "two lines"
    assert describe(HiveError()) == "HiveError"


# -- the family ---------------------------------------------------------------------------------------

NOT_YET: set[str] = set()


def _hive_exceptions() -> Iterator[type[BaseException]]:
    for module in pkgutil.walk_packages(hive.__path__, "hive."):
        if module.name.endswith(".__main__"):
            continue  # a program, not a module: importing it runs it
        for name, value in vars(importlib.import_module(module.name)).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.name
                and not name.startswith("_")
            ):
                yield value


def test_every_error_hive_defines_is_a_hive_error() -> None:
    outside = {cls.__qualname__ for cls in _hive_exceptions() if not issubclass(cls, HiveError)}
    assert outside <= NOT_YET, outside - NOT_YET


# -- each program through it ----------------------------------------------------------------------


def one_line(capsys: pytest.CaptureFixture[str], prog: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}: ") and err.count("\n") == 1 and err.endswith("\n"), err
    return err


@pytest.fixture
def signal_handlers() -> Iterator[None]:
    """The test process's SIGINT and SIGTERM handlers, put back after a program's main changed them."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.fixture
def no_logging_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program's main configures the root logger: not the test process's."""
    monkeypatch.setattr(logging, "basicConfig", lambda **_: None)


def test_hive_agent_log_on_a_state_dir_that_is_a_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hive.cli import main

    state = tmp_path / "state"
    state.write_text("not a directory")
    for follow in ([], ["--follow"]):
        assert main(["agent", "log", "--state-dir", str(state), *follow]) == 2
        assert f"{state} is not a directory" in one_line(capsys, "hive")


def test_hive_agent_log_on_a_missing_state_dir_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hive.cli import main

    state = tmp_path / "nowhere"
    for follow in ([], ["--follow"]):
        assert main(["agent", "log", "--state-dir", str(state), *follow]) == 2
        assert f"no state directory at {state}" in one_line(capsys, "hive")
    (tmp_path / "empty").mkdir()
    assert main(["agent", "log", "--state-dir", str(tmp_path / "empty")]) == 1  # no turn yet
    assert "no turn log at" in one_line(capsys, "hive")


def test_hive_run_with_a_bad_setting_exits_2_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], signal_handlers: None
) -> None:
    from hive.cli import main

    monkeypatch.setenv("HIVE_RUNTIME", "nonsense")
    assert main(["run", "hello"]) == 2
    assert "HIVE_RUNTIME" in one_line(capsys, "hive")


def test_hive_demo_that_fails_shows_the_agents_log_then_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], short_tmp: Path
) -> None:
    from hive import demo
    from hive.bash import DaemonFailedToStart
    from hive.cli import main

    @contextlib.asynccontextmanager
    async def never_ready(*_: object, **__: object) -> AsyncIterator[None]:
        await trio.sleep_forever()
        yield

    monkeypatch.setenv("TMPDIR", str(short_tmp))
    monkeypatch.setattr(demo, "running_daemon", never_ready)
    for within in ("-1", "0"):
        with pytest.raises(SystemExit) as refused:
            main(["demo", "--within", within])
        assert refused.value.code == 2
        assert f"{within!r} must be more than 0 seconds" in capsys.readouterr().err
    assert main(["demo", "--within", "0.1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("hive demo failed; hive-agent's log:\n")
    assert err.endswith("hive: the demo's hive-agent did not finish its two turns within 0.1 s\n")

    async def exits(*_: object) -> list[str]:
        raise DaemonFailedToStart("hive-agent exited with status 2 before it was ready")

    monkeypatch.setattr(demo, "_demo", exits)
    assert main(["demo"]) == 1
    assert capsys.readouterr().err.endswith("hive: hive-agent exited with status 2 before it was ready\n")
    assert list(short_tmp.iterdir()) == []  # its directory removed all the same


def test_hive_agent_with_a_bad_flag_exits_2_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from hive.agent.harness import main

    assert main(["--compact-at", "lots"]) == 2
    assert "--compact-at: 'lots'" in one_line(capsys, "hive-agent")


@pytest.fixture
def bash_daemon_main(
    monkeypatch: pytest.MonkeyPatch, signal_handlers: None, no_logging_setup: None
) -> Callable[..., int]:
    """``hive-bash-daemon``'s main, minus what it does to the whole process (subreaper, limits)."""
    from hive.bash import daemon
    from hive.bash.procs import _limits, _procs

    # `main` imports these once its command line is read: patched where they live.
    monkeypatch.setattr(_procs, "become_subreaper", lambda: False)
    monkeypatch.setattr(_limits, "raise_open_files_limit", lambda: None)
    monkeypatch.setattr(daemon.gc, "freeze", lambda: None)
    monkeypatch.setattr(daemon, "_started", False)
    return daemon.main


def held(lock: Path) -> int:
    """``lock`` taken as another process's daemon would hold it."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_hive_bash_daemon_refused_its_socket_or_state_dir_exits_2(
    bash_daemon_main: Callable[..., int], short_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, sock = short_tmp / "state", short_tmp / "sock"
    sock.write_text("an operator's file")
    assert bash_daemon_main(["--state-dir", str(state), "--socket", str(sock), "--no-cgroups"]) == 2
    assert f"{sock} exists and is not a socket" in one_line(capsys, "hive-bash-daemon")
    fd = held(state / "bash-daemon.lock")
    try:
        assert bash_daemon_main(["--state-dir", str(state), "--socket", str(sock), "--no-cgroups"]) == 2
    finally:
        os.close(fd)
    assert "another hive-bash-daemon is using" in one_line(capsys, "hive-bash-daemon")


def test_hive_subagent_daemon_refused_its_socket_or_state_dir_exits_2(
    monkeypatch: pytest.MonkeyPatch,
    short_tmp: Path,
    capsys: pytest.CaptureFixture[str],
    signal_handlers: None,
    no_logging_setup: None,
) -> None:
    from hive.subagent import Store, daemon

    monkeypatch.delenv("CLAUDECODE", raising=False)  # main drops it from the environment
    state, sock = short_tmp / "state", short_tmp / "sock"
    sock.write_text("an operator's file")
    assert daemon.main(["--state-dir", str(state), "--socket", str(sock)]) == 2
    assert f"{sock} exists and is not a socket" in one_line(capsys, "hive-subagent-daemon")
    fd = held(Store(state).lock)
    try:
        assert daemon.main(["--state-dir", str(state), "--socket", str(sock)]) == 2
    finally:
        os.close(fd)
    assert "another subagent daemon is using" in one_line(capsys, "hive-subagent-daemon")


@pytest.mark.parametrize(
    ("program", "module", "given", "bad"),
    [
        ("hive-subagent-mcp", "hive.subagent.relay", ["--state-dir", "{tmp}"], ["--idle-timeout", "-1"]),
        ("hive-bash-mcp", "hive.bash.relay", ["--socket", "/run/x"], ["--reply-timeout", "soon"]),
    ],
)
def test_a_relay_goes_through_the_boundary(
    monkeypatch: pytest.MonkeyPatch,
    short_tmp: Path,
    capsys: pytest.CaptureFixture[str],
    program: str,
    module: str,
    given: list[str],
    bad: list[str],
) -> None:
    from hive.daemon.relay import Relay

    relay = importlib.import_module(module)
    args = [arg.format(tmp=short_tmp) for arg in given]

    def denied(self: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", "/run/x")

    def interrupted(self: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(Relay, "run", denied)
    assert relay.main(args) == 1
    assert one_line(capsys, program) == f"{program}: /run/x: Permission denied\n"
    monkeypatch.setattr(Relay, "run", interrupted)
    assert relay.main(args) == 130  # SIGINT, as ever
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as usage:
        relay.main(bad)
    assert usage.value.code == 2


def test_the_demo_agent_goes_through_the_boundary(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hive import demo_agent

    def gone() -> None:
        raise BrokenPipeError(errno.EPIPE, "its client closed stdin")

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(demo_agent, "_serve", gone)
    assert demo_agent.main() == 1
    assert one_line(capsys, "hive demo agent") == "hive demo agent: its client closed stdin\n"
    monkeypatch.setattr(demo_agent, "_serve", interrupted)
    assert demo_agent.main() == 0  # SIGINT ends it quietly, as ever
