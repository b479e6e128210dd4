"""The coordinator's parts: one typed :class:`~unified_memory.coordinator.backend.Backend` per file, a
scoped :class:`~unified_memory.coordinator.view.MemoryView` of it, and the layers UnifiedMemory stacks.
"""
