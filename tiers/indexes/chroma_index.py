"""A :class:`~tiers.records.protocols.VectorIndex` kept in chromadb (embedded or server).

Each partition (``"facts/ada"``) is its own chroma collection, so one user's search
can never see another user's vectors (and a search is ~20x faster than a ``where``
filter over one shared collection). Collection names are derived from the partition
(``um-facts-<sha1 prefix>``); the collection metadata keeps the partition's SHA-256
(never the user id itself) to detect a collision.
Collections use cosine space and no embedding function: we always pass our vectors.

    >>> import numpy as np, tempfile
    >>> index = ChromaVectorIndex.embedded(tempfile.mkdtemp())
    >>> index.upsert("facts/ada", ["a", "b"], np.array([[1, 0], [0, 1]], dtype=np.float32))
    >>> [(key, round(score, 3)) for key, score in index.search("facts/ada", np.array([1, 0.2]), 2)]
    [('a', 0.981), ('b', 0.196)]
    >>> index.search("facts/bob", np.array([1, 0]), 5)
    []
    >>> index.close()

chromadb is an optional extra: ``pip install "unified-memory[chroma]"``.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import methodcaller
from pathlib import Path
from typing import Any

import numpy as np

from scoring.errors import (
    ClosedError,
    DependencyError,
    StorageError,
    UnifiedMemoryError,
    invalid,
    wrong_type,
)

__all__ = ["ChromaVectorIndex", "collection_name"]

_INSTALL_HINT = 'chromadb is not installed: pip install "unified-memory[chroma]"'
_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]{0,15}")
_HNSW_KEYS = {"ef_construction", "ef_search", "max_neighbors", "num_threads", "resize_factor", "sync_threshold", "batch_size"}
_PAGE = 5000  # ids fetched per request by ids()
#: How many times a query the server failed with an internal error is tried (ChromaVectorIndex._read).
READ_ATTEMPTS = 3


def _import_chromadb() -> Any:
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as exc:
        raise DependencyError(_INSTALL_HINT) from exc
    return chromadb, Settings(anonymized_telemetry=False, allow_reset=False)


def _check_options(prefix: str, hnsw: Mapping[str, Any] | None) -> None:
    if not isinstance(prefix, str):
        raise wrong_type("prefix", "str", prefix)
    if not _PREFIX.fullmatch(prefix):
        raise invalid("prefix", f"must be 1-16 letters, digits or '_', starting alphanumeric; got {prefix!r}")
    unknown = set(hnsw or {}) - _HNSW_KEYS
    if unknown:
        raise invalid("hnsw", f"unknown keys {sorted(unknown)}; allowed: {sorted(_HNSW_KEYS)}")


def _fingerprint(partition: object) -> str:
    """What a collection records of its partition: a hash, so that a user's id (part of
    the partition) does not stay readable in chroma's files after the user is forgotten."""
    return hashlib.sha256(str(partition).encode("utf-8")).hexdigest()


def collection_name(partition: str, prefix: str = "um") -> str:
    """The chroma collection that holds ``partition``: deterministic, valid, collision-free.

    The kind (text before the first ``/``) stays readable; a SHA-1 prefix (80 bits)
    of the whole partition makes the name unique.

    >>> collection_name("facts/ada")
    'um-facts-9f697a97aff3f0e73ca1'
    >>> collection_name("messages/some user id with spaces/üñí")
    'um-messages-77d616e4a67b21d287c1'
    """
    kind = re.sub(r"[^A-Za-z0-9_]", "_", partition.split("/", 1)[0])[:16] or "p"
    digest = hashlib.sha1(partition.encode("utf-8")).hexdigest()[:20]
    return f"{prefix}-{kind}-{digest}"


class ChromaVectorIndex:
    """Cosine nearest-neighbour search in chromadb, one collection per partition.

    Build it with :meth:`embedded` (a directory) or :meth:`server` (``chroma run``), or
    wrap a chromadb client of your own (:meth:`close` then leaves it open unless
    ``close_client``). ``hnsw`` tunes new collections, e.g. ``{"ef_search": 200}``.

    >>> import chromadb, numpy as np, tempfile
    >>> from chromadb.config import Settings
    >>> client = chromadb.PersistentClient(tempfile.mkdtemp(), settings=Settings(anonymized_telemetry=False))
    >>> index = ChromaVectorIndex(client, prefix="doc", hnsw={"ef_search": 200})
    >>> index.upsert("facts/ada", ["x"], np.ones((1, 3), dtype=np.float32))
    >>> index.ids("facts/ada"), index.persistent
    ({'x'}, True)
    >>> index.close(); client.close()
    """

    persistent = True

    def __init__(
        self, client: Any, *, prefix: str = "um", hnsw: Mapping[str, Any] | None = None, close_client: bool = False
    ) -> None:
        _check_options(prefix, hnsw)
        self._chroma = _import_chromadb()[0]
        self._client: Any = client
        self._prefix = prefix
        self._hnsw = {**(hnsw or {}), "space": "cosine"}
        self._close_client = close_client
        self._collections: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._batch: int | None = None

    @classmethod
    def embedded(cls, path: str | Path, *, prefix: str = "um", hnsw: Mapping[str, Any] | None = None) -> ChromaVectorIndex:
        """An index stored in the directory ``path`` (created if missing), in this process.

        >>> import tempfile
        >>> with ChromaVectorIndex.embedded(tempfile.mkdtemp()) as index:
        ...     index.ids("facts/ada")
        set()
        """
        _check_options(prefix, hnsw)
        chromadb, settings = _import_chromadb()
        try:
            client = chromadb.PersistentClient(path=str(path), settings=settings)
        except Exception as exc:
            raise StorageError(f"cannot open chroma directory {str(path)!r}: {exc}") from exc
        return cls(client, prefix=prefix, hnsw=hnsw, close_client=True)

    @classmethod
    def server(
        cls, host: str = "127.0.0.1", port: int = 8000, *, ssl: bool = False, headers: dict[str, str] | None = None,
        prefix: str = "um", hnsw: Mapping[str, Any] | None = None, timeout: float = 10.0,
        request_timeout: float | None = 120.0,
    ) -> ChromaVectorIndex:
        """An index on a chroma server (``chroma run --path DIR --port 8000``).

        The server's heartbeat is probed first, so a server that is down or silent fails
        within ``timeout`` seconds with a :class:`StorageError`. Later requests connect
        within ``timeout`` and get ``request_timeout`` seconds to answer (chroma's own
        client waits forever; a batch of 5,000 upserts can take seconds on a busy server).

        >>> index = ChromaVectorIndex.server("127.0.0.1", 8000)  # doctest: +SKIP
        """
        _check_options(prefix, hnsw)
        chromadb, settings = _import_chromadb()
        import httpx  # a dependency of chromadb

        bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
        url = f"{'https' if ssl else 'http'}://{bracketed}:{port}/api/v2/heartbeat"
        try:
            httpx.get(url, headers=headers, timeout=timeout).raise_for_status()
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=headers, settings=settings)
        except (httpx.HTTPError, ValueError) as exc:
            raise StorageError(f"chroma server at {url} is not reachable: {exc!r}") from exc
        session = getattr(getattr(client, "_server", None), "_session", None)
        if isinstance(session, httpx.Client):
            session.timeout = httpx.Timeout(request_timeout, connect=timeout)
        return cls(client, prefix=prefix, hnsw=hnsw, close_client=True)

    # -- the VectorIndex protocol ---------------------------------------------------

    def upsert(self, partition: str, ids: Sequence[str], vectors: Any) -> None:
        """Add or replace vectors (float32 ``(n, dim)``, one row per id; last duplicate wins)."""
        self._name(partition)
        ids = self._check_ids(ids)
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(ids):
            raise invalid("vectors", f"expected shape ({len(ids)}, dim), got {matrix.shape}")
        if not ids:
            return
        if matrix.shape[1] == 0 or not np.isfinite(matrix).all():
            raise invalid("vectors", "must be non-empty rows of finite numbers")
        rows = {key: row for row, key in enumerate(ids)}  # last duplicate wins
        if len(rows) != len(ids):
            ids, matrix = list(rows), matrix[list(rows.values())]
        step = self._batch_size()
        for s in range(0, len(ids), step):
            self._call(partition, True, methodcaller("upsert", ids=ids[s : s + step], embeddings=matrix[s : s + step]))

    def delete(self, partition: str, ids: Sequence[str]) -> None:
        """Remove ids (unknown ids and a missing partition are ignored)."""
        self._name(partition)
        ids = list(dict.fromkeys(self._check_ids(ids)))  # chroma refuses duplicates
        step = self._batch_size()
        for s in range(0, len(ids), step):
            self._call(partition, False, methodcaller("delete", ids=ids[s : s + step]))

    def search(self, partition: str, vector: Any, limit: int) -> list[tuple[str, float]]:
        """Up to ``limit`` ``(id, cosine similarity)`` pairs, best first, ties by id
        (``[]`` for ``limit <= 0``, like :class:`~tiers.indexes.numpy_index.NumpyVectorIndex`)."""
        self._name(partition)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise wrong_type("limit", "int", limit)
        query = np.asarray(vector, dtype=np.float32)
        query = query[0] if query.ndim == 2 and query.shape[0] == 1 else query
        if limit <= 0:
            return []
        if query.ndim != 1 or query.size == 0 or not np.isfinite(query).all():
            raise invalid("vector", f"expected one finite vector of shape (dim,), got shape {query.shape}")
        result = self._read(partition, lambda col: col.query(query_embeddings=query[None], n_results=limit,
                                                              include=["distances"]))
        if result is None or not result["ids"]:
            return []
        pairs = [(key, min(1.0, max(-1.0, 1.0 - float(d)))) for key, d in zip(result["ids"][0], result["distances"][0], strict=True)]
        return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))

    def similarity(self, partition: str, vector: Any, ids: Sequence[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of ``ids`` held in the partition (others are left out)."""
        self._name(partition)
        keys = list(dict.fromkeys(self._check_ids(ids)))
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if not keys:
            return {}
        found = self._read(partition, lambda col: col.get(ids=keys, include=["embeddings"]))
        if found is None or not len(found["ids"]):
            return {}
        matrix = np.asarray(found["embeddings"], dtype=np.float32)
        if matrix.shape[1] != query.shape[0]:
            raise invalid("vector", f"expected {matrix.shape[1]} dimensions, got {query.shape[0]}")
        return {key: float(score) for key, score in zip(found["ids"], matrix @ query, strict=True)}

    def ids(self, partition: str) -> set[str]:
        """Every id in the partition (empty for a missing partition)."""
        found: set[str] = set()
        for offset in range(0, 1 << 62, _PAGE):
            page = self._read(partition, methodcaller("get", include=[], limit=_PAGE, offset=offset))
            keys = page["ids"] if page is not None else []
            found.update(keys)
            if len(keys) < _PAGE:
                break
        return found

    def drop(self, partition: str) -> None:
        """Delete the partition's collection (a missing one is fine)."""
        name = self._name(partition)
        with self._lock:
            self._collections.pop(partition, None)
        with self._guard(f"drop {partition!r}"), contextlib.suppress(self._chroma.errors.NotFoundError):
            self._client.delete_collection(name)

    def close(self) -> None:
        """Forget cached collections and release the client if this index owns it (idempotent)."""
        with self._lock:
            client, self._client = self._client, None
            self._collections.clear()
        if client is not None and self._close_client and hasattr(client, "close"):
            client.close()

    def __enter__(self) -> ChromaVectorIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------

    def _name(self, partition: str) -> str:
        if not isinstance(partition, str):
            raise wrong_type("partition", "str", partition)
        if not partition:
            raise invalid("partition", "must not be empty")
        if self._client is None:
            raise ClosedError("the chroma vector index is closed")
        return collection_name(partition, self._prefix)

    @staticmethod
    def _check_ids(ids: Sequence[str]) -> list[str]:
        if isinstance(ids, str):
            raise wrong_type("ids", "a sequence of str", ids)
        ids = list(ids)
        for key in ids:
            if not isinstance(key, str) or not key:
                raise invalid("ids", f"every id must be a non-empty str, got {key!r}")
        return ids

    def _batch_size(self) -> int:
        if self._batch is None:
            with self._guard("read the max batch size"):
                self._batch = max(1, int(self._client.get_max_batch_size()))
        return self._batch

    @contextlib.contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn chroma and transport failures into our errors."""
        errors = self._chroma.errors
        try:
            yield
        except UnifiedMemoryError:
            raise
        except (errors.InvalidArgumentError, errors.DuplicateIDError) as exc:
            raise invalid("vectors", f"chroma refused to {action}: {exc}") from exc
        except (errors.ChromaError, OSError, ValueError, RuntimeError) as exc:
            raise StorageError(f"chroma failed to {action}: {exc!r}") from exc
        except Exception as exc:  # httpx transport errors and the like
            if type(exc).__module__.split(".")[0] in ("httpx", "httpcore"):
                raise StorageError(f"chroma server failed to {action}: {exc!r}") from exc
            raise

    def _collection(self, partition: str, create: bool) -> Any:
        name = self._name(partition)
        with self._lock:
            col = self._collections.get(partition)
        if col is not None:
            return col
        if create:
            col = self._client.get_or_create_collection(
                name, configuration={"hnsw": self._hnsw}, metadata={"partition_sha256": _fingerprint(partition)},
                embedding_function=None)
        else:
            try:
                col = self._client.get_collection(name, embedding_function=None)
            except self._chroma.errors.NotFoundError:
                return None
        metadata = col.metadata or {}
        if metadata.get("partition_sha256", _fingerprint(metadata.get("partition"))) != _fingerprint(partition):
            owner = metadata.get("partition", "another partition")
            raise StorageError(f"collection {name!r} belongs to partition {owner!r}, not {partition!r}")
        with self._lock:
            return self._collections.setdefault(partition, col)

    def _read(self, partition: str, operation: Callable[[Any], Any]) -> Any:
        """:meth:`_call` for a read (a query, a get), tried again (up to :data:`READ_ATTEMPTS` times, 50 ms apart)
        when the server fails it with an internal error: a Chroma server answering a query while
        another client's delete commits can fail it ("Error finding id": the graph still held an
        id whose record was gone), and the same query a moment later succeeds. Seen with four
        processes writing and recalling one user (tests/test_multiprocess.py)."""
        for attempt in range(READ_ATTEMPTS):
            try:
                return self._call(partition, False, operation)
            except StorageError as exc:
                if attempt + 1 == READ_ATTEMPTS or not isinstance(exc.__cause__, self._chroma.errors.InternalError):
                    raise
                time.sleep(0.05)
        return None

    def _call(self, partition: str, create: bool, operation: Callable[[Any], Any]) -> Any:
        """Run ``operation(collection)``; retry once if another client dropped the collection."""
        with self._guard(f"access partition {partition!r}"):
            for attempt in range(2):
                col = self._collection(partition, create)
                if col is None:
                    return None
                try:
                    return operation(col)
                except self._chroma.errors.NotFoundError:
                    with self._lock:
                        self._collections.pop(partition, None)
                    if attempt:
                        raise
            return None
