"""The search indexes, derived from the database and rebuildable from it at any time.

- Lexical: :mod:`~tiers.indexes.partitions` (per-user BM25 indexes kept in step with the rows),
  :mod:`~tiers.indexes.snapshots` (saved so a large memory reopens without re-analysing),
  :mod:`~tiers.indexes.documents` (a tier's searchable documents, lexical and dense),
  :mod:`~tiers.indexes.neighbors` (turns searchable with their neighbour turns).
- Dense: :mod:`~tiers.indexes.embedding_cache` (a text embedded once per user and model),
  :mod:`~tiers.indexes.vectors` (per-tier vector partitions kept in step with the rows),
  :mod:`~tiers.indexes.numpy_index` and :mod:`~tiers.indexes.vector_partition` (the in-process
  index), :mod:`~tiers.indexes.binary_codes` and :mod:`~tiers.indexes.vector_store` (approximate
  search of large partitions, saved beside the file), :mod:`~tiers.indexes.chroma_index` (chromadb).

May import: :mod:`tiers.storage`, :mod:`tiers.records`, :mod:`scoring`.
"""
