"""``python -m hive.cli``: the same as the ``hive`` script."""

import sys

from hive.cli import main

if __name__ == "__main__":  # not when imported (tests walk every module)
    sys.exit(main())
