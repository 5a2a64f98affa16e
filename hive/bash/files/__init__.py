"""A task's files on disk: its record, its output, its run's files, made durable and pruned in time."""
