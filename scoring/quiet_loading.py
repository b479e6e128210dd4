"""Loading a model without progress bars or warnings on stderr.

transformers draws a "Loading weights 103/103" bar and may log warnings while a
model loads; a command-line recall must print nothing but its answer.
:func:`quiet_model_loading` turns transformers' progress bars off and its (and
sentence-transformers') loggers down to errors, and ignores Python warnings, for the
duration of the block only: the previous settings are restored after it, so the
caller's own use of transformers is left as it was.

    >>> with quiet_model_loading():
    ...     warnings.warn("hidden")
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import warnings
from collections.abc import Iterator

__all__ = ["quiet_model_loading"]

_LOGGERS = ("sentence_transformers",)


@contextlib.contextmanager
def quiet_model_loading() -> Iterator[None]:
    """A block in which loading a model writes nothing to stderr (not thread-safe against other
    threads changing transformers' logging settings at the same moment)."""
    try:
        hf_logging = importlib.import_module("transformers.utils.logging")
    except ImportError:  # nothing of transformers to quieten; the load reports the missing package
        hf_logging = None
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    levels = [logger.level for logger in loggers]
    if hf_logging is not None:
        bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
        if hf_logging is not None:
            hf_logging.set_verbosity(verbosity)
            if bars:
                with warnings.catch_warnings():  # huggingface_hub warns when its environment disables bars
                    warnings.simplefilter("ignore")
                    hf_logging.enable_progress_bar()
