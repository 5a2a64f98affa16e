"""The harness for one agent (``hive-agent``): the agent socket, the durable wake queue, the turn
loop through a Runtime, compaction, the turn log."""
