"""``python -m dowhy_cfr.benchmarks``: see :mod:`dowhy_cfr.benchmarks.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
