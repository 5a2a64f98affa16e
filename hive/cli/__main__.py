"""``python -m hive.cli``: the same as the ``hive`` script."""

import sys

from hive.cli import main

if __name__ == "__main__":
    sys.exit(main())
