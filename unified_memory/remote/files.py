"""Where :class:`~unified_memory.remote.client.RemoteMemory` puts an export and finds an import,
checked as ``UnifiedMemory.export_jsonl`` / ``import_jsonl`` check them (same fields, same errors):
a path is written atomically (a temporary file next to it, then ``os.replace``), a text stream
is written as the export arrives; an import is read whole (the service validates it whole).

    >>> import io
    >>> with destination(io.StringIO()) as out:
    ...     _ = out.write('{"kind": "header"}\\n')
    >>> source_bytes(io.StringIO("line\\n"))
    b'line\\n'
"""

from __future__ import annotations

from typing import Any

from unified_memory.errors import MemoryValueError
from unified_memory.io.text_files import read_text_source, text_destination

__all__ = ["destination", "source_bytes"]

#: A text stream for an export (see :func:`~unified_memory.io.text_files.text_destination`).
destination = text_destination


def source_bytes(source: Any) -> bytes:
    """The UTF-8 bytes of ``source`` (a path or a text stream)."""
    text = read_text_source(source)[1]
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryValueError(f"source: not valid unicode text: {exc}", field="source") from None
