"""Which processes the tests start are measured by coverage: the services of ``tests/service`` only.

Coverage's ``patch = ["subprocess"]`` (``pyproject.toml``) puts its settings in the environment
when it starts, so every Python process started afterwards measures itself. Measuring them all
(the CLI runs, the crash loops' children, the hosts of the multi-host tests) made the README's
command about six minutes longer and starved a timed test. So ``tests/conftest.py`` takes the
settings out of the environment at the start of the session (:func:`withhold`), and the service
fixtures of ``tests/service`` give them back to the one kind of child whose code no test process
runs: the service (:func:`measured`). Without ``--cov`` both do nothing.
"""

from __future__ import annotations

import os

_NAMES = ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START")
_WITHHELD: dict[str, str] = {}


def withhold() -> None:
    """Take coverage's settings for child processes out of this process's environment (kept here)."""
    for name in _NAMES:
        value = os.environ.pop(name, None)
        if value is not None:
            _WITHHELD[name] = value


def measured() -> dict[str, str]:
    """The environment a child adds to be measured (empty when coverage is off)."""
    return dict(_WITHHELD)
