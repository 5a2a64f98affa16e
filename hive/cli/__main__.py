"""``python -m hive.cli``: the same as the ``hive`` script."""

import sys

from hive.cli import main

if __name__ == "__main__":  # not when a walk over hive's modules imports it
    sys.exit(main())
