"""hive: the process layer of a multi-agent harness."""

__version__ = "0.1.0"
