"""``python -m hive.cli``: the same as the ``hive`` script."""

import sys

from hive.cli import main

sys.exit(main())
