"""``hive-agent``'s entry point: SIGINT and SIGTERM are recorded from its first instruction, before
the harness's imports (a second and more on a loaded machine), and acted on once the harness can
(`hive.agent.harness`): a stop at any moment of the start stops it, with neither a traceback nor
a signal lost."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from hive._signals import recording_signals


def main(argv: Sequence[str] | None = None) -> int:
    with recording_signals() as early:
        from hive.agent.harness import main as serve

        return serve(argv, early)


if __name__ == "__main__":
    sys.exit(main())
