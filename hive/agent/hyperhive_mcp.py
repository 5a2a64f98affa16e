"""``hive-hyperhive-mcp``: the hyperhive tools as an MCP stdio server, for hive-agent's agent.

It is the bash relay (``hive.bash.relay``, standard library only) in its hyperhive form: it moves
the agent's MCP lines to the Unix socket hive-agent serves the tools on, and stands in, saying
so, while hive-agent is down. A program of its own name, not a flag of ``hive-bash-mcp``: which
server it relays is then plain wherever a command line or a log line shows it, and neither
program has flags that mean nothing to the other.
"""

from __future__ import annotations

import sys

from hive.bash.relay import hyperhive_main as main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
