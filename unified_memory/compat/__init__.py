"""Facades with the names and call shapes of other memory libraries, over one engine; see docs/migration.md.

Each submodule is named after the library it mimics (``motus``, ``marsys``, ...) and is a
thin layer over :class:`unified_memory.Conversation`; importing this package imports
none of them.

    >>> import unified_memory.compat
    >>> unified_memory.compat.__name__
    'unified_memory.compat'
"""
