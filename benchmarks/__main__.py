"""``python -m benchmarks <name> [args]``: see :mod:`benchmarks`."""

import sys

from benchmarks import main

sys.exit(main())
