"""Hypothesis profiles of this suite: a fixed budget in CI, more examples on demand.

- ``dev`` (the default on a developer's machine): Hypothesis' random search, remembering the
  failures it found in ``.hypothesis/`` so the next run tries them first.
- ``ci`` (loaded when ``CI`` is set): ``derandomize``, so every CI run tries the same examples
  and takes the same time; no example database (a fresh clone has none); a failure prints the
  blob that reproduces it (``@reproduce_failure``).
- ``thorough`` (``HYPOTHESIS_PROFILE=thorough`` or ``pytest --hypothesis-profile=thorough``):
  ten times the examples of every property, including those that name their own
  ``max_examples`` and the state machines of the reliability suite (:func:`factor`).

No profile has a deadline: a test's speed is measured by ``benchmarks/``, never by a unit test
on a loaded machine.
"""

from __future__ import annotations

import os

from hypothesis import settings

#: The examples a property tries without its own ``max_examples`` (Hypothesis' own default).
BASE_EXAMPLES = 100
THOROUGH = 10

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, database=None, print_blob=True)
settings.register_profile("thorough", deadline=None, max_examples=BASE_EXAMPLES * THOROUGH)


def profile_name() -> str:
    """``HYPOTHESIS_PROFILE`` if set, else ``ci`` under CI, else ``dev``."""
    return os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")


settings.load_profile(profile_name())


def factor() -> int:
    """How many times its written budget each property runs under the loaded profile (1, or
    10 under ``thorough``). Read from the loaded default, so ``--hypothesis-profile`` counts too."""
    return max(1, settings.default.max_examples // BASE_EXAMPLES)


def scale_written_budgets(items) -> None:
    """Multiply by :func:`factor` the ``max_examples`` a test wrote in its own ``@settings``
    (an explicit setting outranks any profile, so ``thorough`` would not reach it otherwise).
    Hypothesis reads the settings it attached to the test when the test runs. A test whose budget
    equals the profile's own has inherited it (``@settings(deadline=None)``) and is left as is."""
    times = factor()
    if times == 1:
        return
    inherited = settings.default.max_examples
    seen: set[int] = set()
    for item in items:
        test = getattr(item, "obj", None)
        test = getattr(test, "__func__", test)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if (own is None or not getattr(test, "is_hypothesis_test", False) or id(test) in seen
                or own.max_examples == inherited):
            continue
        seen.add(id(test))
        test._hypothesis_internal_use_settings = settings(own, max_examples=own.max_examples * times)
