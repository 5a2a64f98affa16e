"""Subagents: agent sessions an agent starts and steers through MCP tools (``hive-subagent-mcp``).

``server`` is the MCP stdio server (the parent agent spawns it per turn); ``daemon`` holds the
sessions and runs their turns through ``hive.runtime``; ``_manager`` is the sessions and their
turns, ``_slots`` the pure slot transitions (starting, running, stopping).
"""
