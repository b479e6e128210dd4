"""Pure ranking: functions and small classes with no state of a memory's own.

- Lexical: :mod:`~scoring.text` (analysis: words, stems, stop words), :mod:`~scoring.lexical`
  (BM25 indexes) with :mod:`~scoring.postings` and :mod:`~scoring.lexical_records`.
- Dense: :mod:`~scoring.embeddings` (the embedders, lazy), :mod:`~scoring.linalg`, the ONNX
  export and query path (:mod:`~scoring.onnx_export`, :mod:`~scoring.onnx_query`,
  :mod:`~scoring.onnx_manifest`, :mod:`~scoring.model_fingerprint`, :mod:`~scoring.quiet_loading`).
- Scores: :mod:`~scoring.importance`, :mod:`~scoring.decay`, :mod:`~scoring.temporal` (time cues),
  :mod:`~scoring.fusion` (combining them, MMR).
- :mod:`~scoring.errors`: the exception tree every layer raises (public as
  :mod:`unified_memory.errors`); :mod:`~scoring.checks`: argument checks built on it.

May import: nothing of ours but itself (tests/test_import_graph.py).
"""
