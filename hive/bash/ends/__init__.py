"""What the agent is owed of its tasks: each end and each output-watch match, until it is told."""
