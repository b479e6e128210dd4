"""Configuration: :class:`MemoryConfig` and its nested parts.

Every field has a default that works; override any of them by keyword on
:class:`~unified_memory.UnifiedMemory`::

    >>> from unified_memory.config import MemoryConfig
    >>> MemoryConfig(short_term_limit=20).short_term_limit
    20
    >>> MemoryConfig.build(None, {"importance_threshold": 0.5}).importance_threshold
    0.5

An invalid value raises :class:`~unified_memory.errors.ConfigError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from unified_memory.errors import ConfigError, wrong_type

__all__ = ["MemoryConfig", "RankingConfig", "EvictionConfig", "ContextConfig", "VectorConfig", "config_error",
           "coerce_config"]

#: The dense ceiling of hybrid retrieval when ``RankingConfig.dense_ceiling`` is None.
HYBRID_DENSE_CEILING = 0.7


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    # Built directly (``MemoryConfig(short_term_limit=0)``) or assigned, a bad field is a
    # ConfigError naming it, like everywhere else, not pydantic's ValidationError.
    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise config_error(exc) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_") and name not in type(self).model_fields:
            raise ConfigError(f"{name}: unknown setting", field=name)
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise config_error(exc) from None


class RankingConfig(_Config):
    """How a recall hit's score is made from its parts (see :func:`scoring.fusion.fuse`).

    ``score = relevance × (base + importance_weight·importance + recency_weight·recency)
    × tier_weight × (superseded_penalty if superseded) × (archived_penalty if archived)``
    (a fact's confidence weighs in too: ``confidence_weight``). Relevance multiplies, so an
    irrelevant item never outranks a relevant one for being important, and a
    low-importance fact still surfaces when it is what the query asks about.
    """

    base: float = Field(default=0.6, ge=0.0)
    importance_weight: float = Field(default=0.25, ge=0.0)
    recency_weight: float = Field(default=0.15, ge=0.0)
    recency_half_life_days: float = Field(default=30.0, gt=0.0)
    superseded_penalty: float = Field(default=0.5, ge=0.0, le=1.0)
    archived_penalty: float = Field(
        default=0.6, ge=0.0, le=1.0,
        description="An archived fact (pushed out of the active facts by long_term_limit) keeps this share of "
                    "its score: it ranks below an active fact as relevant, important and recent, but an exact "
                    "answer that was archived still outranks active facts that only resemble the question (with "
                    "300 near-identical facts and long_term_limit=50, 0.4 hid every archived answer from the top "
                    "5 in hybrid retrieval; 0.6 puts each first: tests/unified_memory/test_archive.py).")
    lexical_weight: float = Field(default=0.5, ge=0.0, le=1.0,
                                  description="Hybrid retrieval: relevance = w·lexical + (1-w)·dense.")
    dense_floor: float = Field(default=0.1, ge=-1.0, lt=1.0,
                               description="Cosine similarity at or below which dense relevance is 0.")
    dense_ceiling: float | None = Field(
        default=None, gt=-1.0, le=1.0,
        description="Cosine similarity at or above which dense relevance is 1. None: 0.7 with hybrid retrieval "
                    "(a paraphrase is a full match beside BM25's), 1.0 with embedding-only retrieval (where "
                    "nothing else separates the closest text from its paraphrases).")
    entity_name_boost: float = Field(default=1.5, ge=1.0,
                                     description="Multiplies a hit on a typed entity (not a bare thing) whose whole name is in the query.")
    tier_weights: dict[str, float] = Field(
        default_factory=lambda: {"long_term": 1.0, "entity": 0.9, "episodic": 0.85, "short_term": 0.8}
    )
    bm25_k1: float = Field(default=1.2, gt=0.0)
    bm25_b: float = Field(default=0.75, ge=0.0, le=1.0)
    neighbor_turns: int = Field(default=2, ge=0, le=10,
                                description="A message is searched with this many turns before and after it.")
    neighbor_gap_minutes: float = Field(default=120.0, gt=0.0,
                                        description="A longer pause between two turns starts a new conversation.")
    neighbor_match_weight: float = Field(
        default=0.75, ge=0.0, le=1.0,
        description="Multiplies the lexical relevance of a message whose own text has none of the "
                    "query's words (it matched through its neighbours).")
    temporal_weight: float = Field(
        default=0.5, ge=0.0, le=1.0,
        description="When the query names a time (\"last week\", \"in May 2023\"), a fact or message "
                    "from outside it keeps 1 - temporal_weight of its score.")
    temporal_tolerance_days: float = Field(
        default=3.0, ge=0.0, description="Items this many days outside the named time count as outside it.")
    confidence_half_life_days: float | None = Field(
        default=180.0, gt=0.0,
        description="A fact's confidence halves every this many days since it was last stated "
                    "(reinforcing it restores it); None keeps confidence constant.")
    confidence_weight: float = Field(
        default=0.3, ge=0.0, le=1.0,
        description="A fact keeps 1 - confidence_weight·(1 - confidence now) of its score.")
    speaker_boost: float = Field(
        default=0.5, ge=0.0,
        description="A message whose speaker the query names (\"what did Maria say about ...\") "
                    "scores 1 + speaker_boost times higher.")
    hop_decay: float = Field(
        default=0.6, ge=0.0, le=1.0,
        description="An entity linked by a relation to an entity the query names is recalled "
                    "at this fraction of that entity's score (0 turns graph hops off).")
    diversity: float = Field(
        default=0.5, ge=0.0, le=1.0,
        description="Maximal marginal relevance against restatements: a hit whose words overlap a "
                    "better one's by a Jaccard fraction J > 0.5 keeps 1 - diversity·(J-0.5)/0.5 of its "
                    "score (0 turns it off).")
    rerank_depth: int = Field(default=30, ge=1, description="How many of the best hits a reranker re-scores.")
    lexical_norm_floor: float = Field(
        default=0.25, gt=0.0, le=1.0,
        description="Lexical relevance = BM25 / max(best BM25 of the tier for this query, "
                    "lexical_norm_floor × the query's upper bound).")

    def ceiling(self, mode: str) -> float:
        """The dense ceiling in effect for a retrieval ``mode`` (see ``dense_ceiling``).

        >>> RankingConfig().ceiling("hybrid"), RankingConfig().ceiling("embedding")
        (0.7, 1.0)
        """
        if self.dense_ceiling is not None:
            return self.dense_ceiling
        return 1.0 if mode == "embedding" else HYBRID_DENSE_CEILING

    @model_validator(mode="after")
    def _known_tiers(self) -> RankingConfig:
        unknown = set(self.tier_weights) - {"long_term", "entity", "episodic", "short_term"}
        if unknown:
            raise ValueError(f"tier_weights has unknown tiers: {sorted(unknown)}")
        if self.base + self.importance_weight + self.recency_weight <= 0:
            raise ValueError("base + importance_weight + recency_weight must be positive")
        if self.ceiling("hybrid") <= self.dense_floor:
            raise ValueError("dense_ceiling must be above dense_floor" if self.dense_ceiling is not None else
                             f"dense_floor must be below dense_ceiling ({HYBRID_DENSE_CEILING} unless set)")
        return self


class EvictionConfig(_Config):
    """Which active facts ``long_term_limit`` archives first: the lowest
    ``importance_weight·importance + recency_weight·recency + use_weight·use``, where
    recency decays from the last time the fact was stated or recalled (half-life
    ``recency_half_life_days``) and use is ``log(1+access_count)/log(1+use_saturation)``
    capped at 1. Facts written by the current call are never archived while older
    ones can go instead. Archived facts are kept (never deleted) and still recalled,
    below active facts (``RankingConfig.archived_penalty``)."""

    importance_weight: float = Field(default=0.5, ge=0.0)
    recency_weight: float = Field(default=0.3, ge=0.0)
    use_weight: float = Field(default=0.2, ge=0.0)
    recency_half_life_days: float = Field(default=30.0, gt=0.0)
    use_saturation: int = Field(default=10, ge=1)


class ContextConfig(_Config):
    """How :meth:`UnifiedMemory.context` shares its budget between sections.

    Shares are relative; a section that needs less than its share gives the rest
    to the others, in the order of ``sections``.
    """

    sections: tuple[str, ...] = ("facts", "entities", "episodes", "conversation")
    shares: dict[str, float] = Field(
        default_factory=lambda: {"facts": 0.35, "entities": 0.15,
                                 "episodes": 0.2, "conversation": 0.3}
    )
    recall_limit: int = Field(default=80, ge=1)
    allocation: Literal["score", "shares"] = Field(
        default="score", description="With a query: fill the recalled sections by score across them "
                                     "(score), or each within its share (shares).")
    header: str = "memory"
    profile_share: float = Field(
        default=0.2, ge=0.0, le=1.0,
        description="The most of the budget the user's profile may take (its key facts, safety first, shown "
                    "first whatever the query: unified_memory.retrieval.profile); what it leaves goes to the "
                    "other sections. 0: no profile section.")
    profile_max_tokens: int = Field(
        default=100, ge=0,
        description="The most tokens the profile takes whatever the budget (a user's handful of key facts "
                    "fit): at 2,000 tokens the query's own memories keep the room (LoCoMo dev, hybrid, "
                    "evidence in context(2000): 0.9061 without a profile, 0.9027 with a cap of 150, 0.9058 "
                    "with this cap of 100, 0.9045 once each line of a group conversation says who; "
                    "benchmarks/results/locomo_profile.md).")

    @model_validator(mode="after")
    def _consistent(self) -> ContextConfig:
        known = {"facts", "entities", "episodes", "conversation"}
        unknown = (set(self.sections) | set(self.shares)) - known
        if unknown:
            raise ValueError(f"unknown sections: {sorted(unknown)}")
        if any(v < 0 for v in self.shares.values()):
            raise ValueError("shares must be non-negative")
        if not self.header.isidentifier():
            raise ValueError("header must be a plain identifier")
        return self


class VectorConfig(_Config):
    """Where dense vectors are searched (used when retrieval is embedding or hybrid).

    ``numpy``: an in-process index rebuilt from the SQLite embedding cache in each
    process: exact, until a user's partition reaches ``approximate_above`` vectors, from
    where it is searched by scanning 1,024-bit binary codes of its vectors for the
    ``scan_depth`` nearest and scoring those exactly; on a SQLite file such partitions are
    saved in ``<memory file>.vectors/`` at close and memory-mapped at the next open.
    ``chroma``: a chromadb index — embedded in ``chroma_path`` (default:
    ``<memory file>.chroma`` beside the SQLite file), or a Chroma server when
    ``chroma_host`` is set. SQLite stays the source of truth either way.
    """

    backend: Literal["numpy", "chroma"] = "numpy"
    chroma_path: str | None = None
    chroma_host: str | None = None
    chroma_port: int = Field(default=8000, ge=1, le=65535)
    chroma_ssl: bool = False
    chroma_ef_search: int = Field(default=200, ge=10, description="HNSW search breadth of new chroma "
                                  "collections: higher finds more true neighbours, a little slower.")
    chroma_prefix: str = Field(
        default="um", pattern=r"^[A-Za-z0-9][A-Za-z0-9_]{0,15}$",
        description="Collection name prefix. Memory files that share one Chroma server and hold the same "
                    "user ids need different prefixes, or each repairs the other's vectors away.")
    approximate_above: int | None = Field(
        default=50_000, ge=2,
        description="numpy backend: a partition of at least this many vectors is searched approximately "
                    "(a scan of binary codes, then exact scores for the scan_depth nearest: 3.2 ms instead of "
                    "43 ms at 300k text-like vectors, 2 ms instead of 7.7 at 50k MiniLM vectors, finding what "
                    "the exact search finds: benchmarks/results/binary_index.md, binary_index_threshold.md); "
                    "below half of it, exact again. None = always exact.")
    scan_depth: int = Field(default=2000, ge=1, description="numpy backend, approximate partitions: how many "
                            "nearest binary codes are scored exactly; higher finds more true neighbours, slower.")
    ef_search: int = Field(default=128, ge=1, description="no longer used (the HNSW graph it tuned was "
                           "replaced by a scan of binary codes: see scan_depth); accepted so older "
                           "configurations still load.")
    hnsw_m: int = Field(default=16, ge=2, le=256, description="no longer used (see ef_search).")
    ef_construction: int = Field(default=100, ge=1, description="no longer used (see ef_search).")
    nprobe: int = Field(default=16, ge=1, description="no longer used (the inverted file it tuned was "
                        "replaced, now by a scan of binary codes: see scan_depth); accepted so older "
                        "configurations still load.")


class MemoryConfig(_Config):
    """All knobs of a :class:`~unified_memory.UnifiedMemory`.

    >>> cfg = MemoryConfig(long_term_limit=None, episodic_retention_days=30)
    >>> cfg.long_term_limit is None
    True
    """

    importance_threshold: float = Field(default=0.7, ge=0.0, le=1.0,
                                        description="Minimum importance for promotion to long-term.")
    short_term_limit: int = Field(default=100, ge=1, description="Window size in messages.")
    short_term_max_tokens: int | None = Field(default=None, ge=1,
                                              description="Optional window size in tokens.")
    long_term_limit: int | None = Field(
        default=1000, ge=1,
        description="Active facts per user; beyond it the least retained are archived (kept, listed with "
                    "facts(include_archived=True), recalled below active facts: never deleted). None = all "
                    "facts stay active.")
    episodic_retention_days: float | None = Field(default=None, gt=0,
                                                  description="Prune promoted log entries older than this.")
    auto_promote: bool = Field(default=True, description="Promote turns as they leave the window.")
    extract_on_write: bool = Field(
        default=True, description="Extract facts, entities and relations from messages of promote_roles as "
                                  "they are written (add_turn, add_message(s), ingest), so what a user says "
                                  "is recallable as memory at once; False waits until they leave the window. "
                                  "Only with auto_promote (False defers all extraction to consolidate()).")
    summarize_on_trim: bool = Field(
        default=True, description="Fold what leaves the window into the conversation's running summary, "
                                  "which context() shows before the conversation.")
    promote_roles: tuple[Literal["user", "assistant", "system", "tool"], ...] = ("user",)
    redact_secrets: bool = Field(
        default=False, description="Scrub API keys, credentials, e-mail addresses, phone and card numbers "
                                   "from every text before it is stored (SecretRedactor), unless a "
                                   "redactor is passed.")
    context_max_tokens: int = Field(default=4000, ge=1)
    compaction_ratio: float | None = Field(
        default=0.7, gt=0.0, le=1.0,
        description="Compact the conversation window when it holds more than this share of "
                    "context_max_tokens (None: never); what leaves is summarised and promoted.")
    compaction_min_reduction: float = Field(
        default=0.4, ge=0.0, lt=1.0,
        description="A compaction brings the window down to threshold x (1 - this).")
    retrieval: Literal["auto", "lexical", "embedding", "hybrid"] = Field(
        default="auto", description="auto: hybrid when the embeddings extra is installed, else lexical.")
    vectors: VectorConfig = Field(default_factory=VectorConfig)
    pool_size: int = Field(
        default=4, ge=1, le=1000,
        description="PostgreSQL: connections this memory may hold. One carries its writes and reads; while "
                    "another thread holds it, reads run on up to pool_size - 1 more, opened when first needed "
                    "(1: threads take turns on one connection). Ignored on a SQLite file.")
    search: Literal["auto", "database", "in_process"] = Field(
        default="auto",
        description="Where recall finds its candidates. auto: in the database on PostgreSQL with pgvector (BM25 "
                    "and vectors in tables written with the rows: any host answers any user at once, nothing kept "
                    "per user in the process), else in this process's indexes (a SQLite file always). database: "
                    "PostgreSQL with pgvector or an error. in_process: this process's indexes everywhere.")
    token_counter: Literal["auto", "chars", "tiktoken"] = Field(
        default="auto", description="auto: tiktoken when installed and its encoding is cached offline, else chars/4.")
    tiktoken_encoding: str = "cl100k_base"
    ranking: RankingConfig = Field(default_factory=RankingConfig)
    eviction: EvictionConfig = Field(default_factory=EvictionConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)

    @classmethod
    def build(cls, config: MemoryConfig | dict[str, Any] | None, overrides: dict[str, Any]) -> MemoryConfig:
        """Merge a base config (or dict) with keyword overrides, validating everything.

        >>> MemoryConfig.build({"short_term_limit": 5}, {"auto_promote": False}).short_term_limit
        5
        """
        if config is None:
            base: dict[str, Any] = {}
        elif isinstance(config, MemoryConfig):
            base = config.model_dump()
        elif isinstance(config, dict):
            base = dict(config)
        else:
            raise ConfigError(f"config: expected MemoryConfig or dict, got {type(config).__name__}",
                              field="config")
        if not isinstance(overrides, Mapping):
            raise wrong_type("overrides", "dict", overrides)
        base.update(overrides)
        try:
            return cls.model_validate(base)
        except ValidationError as exc:
            raise config_error(exc) from None


def config_error(exc: ValidationError, prefix: str = "") -> ConfigError:
    """Turn a pydantic ValidationError into a ConfigError whose message names the field.

    >>> try:
    ...     MemoryConfig.model_validate({"short_term_limit": 0})
    ... except ValidationError as exc:
    ...     print(config_error(exc).field)
    short_term_limit
    """
    first = exc.errors()[0]
    inner = (first.get("ctx") or {}).get("error")
    if isinstance(inner, ConfigError):  # raised by a nested config's own __init__: keep its field, prefixed
        at = ".".join(p for p in (*(str(p) for p in first["loc"]), inner.field or "") if p)
        field = prefix + at if at else (prefix.rstrip(".") or "config")
        text = str(inner)
        text = text[len(inner.field) + 2:] if inner.field and text.startswith(f"{inner.field}: ") else text
        return ConfigError(f"{field}: {text}", field=field)
    field = prefix + ".".join(str(p) for p in first["loc"]) if first["loc"] else (prefix.rstrip(".") or "config")
    if first["type"] == "extra_forbidden" and not ".".join(str(p) for p in first["loc"]):  # a setting named ""
        field = prefix.rstrip(".") or "config"
        message = f"{field}: unknown setting ''"
    elif first["type"] == "extra_forbidden":
        message = f"{field}: unknown setting"
    else:
        message = f"{field}: {first['msg']} (got {first.get('input')!r})"
    more = len(exc.errors()) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return ConfigError(message, field=field)


_C = TypeVar("_C", bound=BaseModel)


def coerce_config(cls: type[_C], value: Any, field: str = "config") -> _C:
    """``value`` (an instance of ``cls``, a dict of its fields, or ``None`` for the defaults)
    as a ``cls``; a bad field is a ``ConfigError`` naming it (``config.safety_ratio``).

    >>> coerce_config(VectorConfig, {"backend": "chroma"}).backend
    'chroma'
    >>> coerce_config(VectorConfig, {"chroma_port": 0}, "vectors")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    unified_memory.errors.ConfigError: vectors.chroma_port: ...
    """
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise wrong_type(field, f"{cls.__name__} or dict", value)
    try:
        return cls.model_validate(dict(value))
    except ValidationError as exc:
        raise config_error(exc, f"{field}.") from None
