"""``python -m unified_memory``: the ``unified-memory`` command line (see :mod:`unified_memory.cli`).

    >>> from unified_memory.cli import main
    >>> callable(main)
    True
"""

from __future__ import annotations

if __name__ == "__main__":
    import sys

    from unified_memory.cli import main

    sys.exit(main())
