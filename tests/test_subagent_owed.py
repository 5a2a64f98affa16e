"""The subagent daemon's telling, through the kit's outbox, driven through random lives of a daemon.

The machine plays the turn runner, the ``status`` calls and the agent socket around the real
teller (`hive.subagent._telling`) and its records on disk: turns end with status calls waiting
for them or not, status answers showing an end reach a client still there or one gone, wakes are
acknowledged, and the daemon crashes at any moment and recovers from its records alone. Each
session's caller has an agent socket (a harness: an answer tells an end only once its shown wake
is acknowledged) or none (an answer tells it). Checked throughout, as the bash daemon's machine
(tests/test_owed_model.py) checks its ends:

- the outbox never stops owing an end the agent was not told;
- no ordinary wake is sent twice by one daemon, none while a status call holds it, and none
  after its end was told;
- a crash owes again every end not told, and sends its wake again where there is a socket.

A record keeps only its session's last end: a session's next turn ends here only once its last
end was told.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hive.agent_socket import Wake
from hive.subagent._ledger import Ledger
from hive.subagent._session_records import SessionRecord, TurnEnd
from hive.subagent._store import Store
from hive.subagent._telling import Teller

SOCKET = "/nonexistent/agent.sock"  # never connected to: the fake courier keeps what it is given


@attrs.define(eq=False)
class FakeCourier:
    machine: SubagentTellingMachine
    on_acked: Callable[[str], None]

    def send(self, key: str, socket: Path, wake: Wake) -> None:
        self.machine.sent(key, wake)

    def withdraw(self, key: str) -> None:
        self.machine.courier.discard(key)

    def start(self, nursery: object) -> None:
        raise AssertionError("not run in process")


@attrs.define(eq=False)
class Waiting:
    """A status call's view of a live turn: the calls waiting when it ended carry its end."""

    name: str
    turn: str
    carriers: set[object]


@attrs.define
class Answer:
    delivered: Callable[[bool], None]
    shown: list[str]


class SubagentTellingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="hive-owed-"))
        self.store = Store(self.root)
        self.store.create_dirs()
        self.turns = (f"t{n}" for n in itertools.count())
        self.told: dict[str, bool] = {}
        """Every end that came, by key: whether the agent has been told it."""
        self.harness: dict[str, bool] = {}
        """Each session's caller: whether it has an agent socket."""
        self.new_life()

    def new_life(self) -> None:
        """A daemon that knows nothing yet but what its records on disk say."""
        self.courier: set[str] = set()
        self.sent_once: set[str] = set()
        self.answers: list[Answer] = []
        self.ledger = Ledger(self.store)
        self.teller = Teller(self.ledger, lambda acked: FakeCourier(self, acked))
        for record in self.store.load_all():
            self.ledger.records[record.name] = record
            self.teller.came(record)

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def sent(self, key: str, wake: Wake) -> None:
        if wake.shown_at is None:
            assert key not in self.sent_once, f"{key}'s wake sent twice by one daemon"
            assert not self.teller.ends.held(key), f"a wake for {key} while a status call holds it"
        assert not self.told[key], f"{key} sent after it was told"
        assert self.harness[key.partition(":")[0]], f"a wake for {key}, whose caller has no socket"
        self.sent_once.add(key)
        self.courier.add(key)

    def last(self, name: str) -> TurnEnd | None:
        record = self.ledger.records.get(name)
        return None if record is None else record.last

    # -- rules ----------------------------------------------------------------------------------

    @rule(name=st.sampled_from(("a", "b")), harness=st.booleans(), waiting=st.integers(0, 2))
    def turn_ends(self, name: str, harness: bool, waiting: int) -> None:
        """A turn ends, ``waiting`` status calls waiting for it (their answers carry it)."""
        last = self.last(name)
        if last is not None and not self.told[f"{name}:{last.turn}"]:
            return
        harness = self.harness.setdefault(name, harness)
        turn = next(self.turns)
        record = self.ledger.records.get(name) or SessionRecord(name, "claude", time.time())
        record.agent_socket = SOCKET if harness else None
        record.last = TurnEnd(turn, 1, "completed", False, time.time(), time.time(), result="done")
        self.ledger.records[name] = record
        self.ledger.save(record)
        self.told[f"{name}:{turn}"] = False
        tokens = [object() for _ in range(waiting)]
        live = Waiting(name, turn, set(tokens))
        self.teller.came(record, holds=waiting)
        for token in tokens:
            self.answer_soon(token, [live])

    @rule(name=st.sampled_from(("a", "b")))
    def status(self, name: str) -> None:
        """A status call that did not wait: it shows the session's end not yet told."""
        self.answer_soon(object(), [], name)

    def answer_soon(self, token: object, carried: list[Waiting], name: str | None = None) -> None:
        name = carried[0].name if carried else name
        assert name is not None
        last = self.last(name)
        shown = [(name, last.turn)] if last is not None and not last.told else []
        delivered = self.teller.after_answer(token, carried, shown)  # type: ignore[arg-type]
        if delivered is not None:
            self.answers.append(Answer(delivered, [f"{n}:{t}" for n, t in shown]))

    @precondition(lambda self: self.answers)
    @rule(data=st.data(), connected=st.booleans())
    def answer(self, data: st.DataObject, connected: bool) -> None:
        """A status answer is written to its client (still there, or gone)."""
        answer = self.answers.pop(data.draw(st.integers(0, len(self.answers) - 1)))
        for key in answer.shown:
            if connected and not self.harness[key.partition(":")[0]]:
                self.told[key] = True
        answer.delivered(connected)

    @precondition(lambda self: self.courier)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.courier)))
        self.courier.discard(key)
        self.told[key] = True
        self.teller.acked(key)

    @rule()
    def crash(self) -> None:
        """SIGKILL: the answers not yet written never are; a new daemon starts from the records."""
        self.new_life()
        for key, _last in self.recorded():
            if not self.told[key]:
                assert self.teller.ends.owes(key), f"{key} is not owed again after a crash"
                name = key.partition(":")[0]
                assert key in self.courier or not self.harness[name], f"{key}'s wake is not sent again"

    def recorded(self) -> list[tuple[str, TurnEnd]]:
        """The last end of each session's record, by key."""
        records = self.ledger.records.values()
        return [(f"{r.name}:{r.last.turn}", r.last) for r in records if r.last is not None]

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def every_end_is_told_or_owed(self) -> None:
        for key, last in self.recorded():
            if not self.told[key]:
                assert self.teller.ends.owes(key), f"{key} is no longer owed, yet was never told"
                assert not last.told, f"{key} is marked told, yet was never told"
            else:
                assert not self.teller.ends.owes(key), f"{key} was told and is still owed"


SubagentTellingMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=40)
TestSubagentTelling = SubagentTellingMachine.TestCase
