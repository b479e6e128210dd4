"""unified-memory: tiered long-term memory for LLM agents.

A :class:`UnifiedMemory` composes a short-term conversation window, importance-
scored long-term facts, an entity graph and an episodic log over one SQLite file;
it promotes what ages out of the window, answers federated recall queries and
assembles token-budgeted context blocks.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory() as mem:
    ...     _ = mem.remember("I'm allergic to peanuts")
    ...     mem.recall("peanuts")[0].text
    "I'm allergic to peanuts"

:class:`RemoteMemory` is the same interface over the memory service's HTTP API (needs
httpx: ``pip install 'unified-memory[server]'``).

Only the leaf modules (errors, types, config) load eagerly; the coordinator and
its tiers load on first use (PEP 562), so importing ``tiers`` or ``scoring``
first works and ``import unified_memory`` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from unified_memory._version import __version__
from unified_memory.config import ContextConfig, EvictionConfig, MemoryConfig, RankingConfig, VectorConfig
from unified_memory.errors import (
    AuthenticationError,
    ClosedError,
    ConfigError,
    ConflictError,
    DependencyError,
    LLMError,
    MemoryTypeError,
    MemoryValueError,
    NotFoundError,
    PermissionDeniedError,
    StorageError,
    StorageUnavailableError,
    StoreUnavailableError,
    UnifiedMemoryError,
)
from unified_memory.types import (
    ContextBlock,
    Entity,
    Episode,
    ExtractedEntity,
    ExtractedFact,
    ExtractedTriple,
    Extraction,
    Fact,
    MemoryStats,
    Message,
    Profile,
    RecallHit,
    SectionUsage,
    StoredItem,
    Triple,
)

_LAZY = {
    "UnifiedMemory": "unified_memory.memory",
    "RemoteMemory": "unified_memory.remote.client",
    "MemoryClient": "unified_memory.protocols",
    "remember": "unified_memory.agents.remember",
    "register_store": "unified_memory.agents.remember",
    "get_store": "unified_memory.agents.remember",
    "MemoryEvent": "unified_memory.events",
    "LLMExtractor": "unified_memory.extraction.llm_extractor",
    "ExtractiveSummarizer": "unified_memory.extraction.summarizers",
    "LLMSummarizer": "unified_memory.extraction.summarizers",
    "Summarizer": "unified_memory.protocols",
    "OpenAICompatibleLLM": "unified_memory.agents.llm",
    "as_llm": "unified_memory.agents.llm",
    "MemoryTool": "unified_memory.agents.tools",
    "memory_tools": "unified_memory.agents.tools",
    "remember_tool": "unified_memory.agents.tools",
    "recall_tool": "unified_memory.agents.tools",
    "run_tool_call": "unified_memory.agents.tools",
    "RuleExtractor": "unified_memory.extraction.rules",
    "HeuristicImportanceScorer": "scoring.importance",
    "score_importance": "scoring.importance",
    "assess_importance": "scoring.importance",
    "make_token_counter": "unified_memory.retrieval.tokens",
    "Embedder": "unified_memory.protocols",
    "Extractor": "unified_memory.protocols",
    "ImportanceScorer": "unified_memory.protocols",
    "Reranker": "unified_memory.protocols",
    "LLM": "unified_memory.protocols",
    "TokenCounter": "unified_memory.protocols",
    "VectorIndex": "unified_memory.protocols",
    "Conversation": "unified_memory.conversation.engine",
    "ConversationState": "unified_memory.conversation.state",
    "ConversationLog": "unified_memory.conversation.log",
    "CompactionConfig": "unified_memory.conversation.compaction",
    "CompactionStats": "unified_memory.conversation.compaction",
    "SummarizationConfig": "unified_memory.conversation.compaction",
    "ToolTruncationConfig": "unified_memory.conversation.compaction",
    "compact": "unified_memory.conversation.compaction",
    "context_window": "unified_memory.conversation.model_windows",
    "register_model": "unified_memory.conversation.model_windows",
    "ConversationStore": "unified_memory.protocols",
    "Redactor": "unified_memory.protocols",
    "SecretRedactor": "unified_memory.privacy.secrets",
    "redact_secrets": "unified_memory.privacy.secrets",
    "InMemoryConversationStore": "tiers.sessions",
    "JSONConversationStore": "tiers.sessions",
    "SQLiteConversationStore": "tiers.sessions",
    "RedisConversationStore": "tiers.sessions",
    "PostgresConversationStore": "tiers.sessions",
    "IngestReport": "unified_memory.io.ingest",
    "ingest_file": "unified_memory.io.ingest",
    "MemoryMaxTokensStrategy": "unified_memory.conversation.strategies",
    "MemoryMaxMessagesStrategy": "unified_memory.conversation.strategies",
    "SummarizerStrategy": "unified_memory.conversation.strategies",
    "NeuralyzerStrategy": "unified_memory.conversation.strategies",
    "MemoryStrategies": "unified_memory.conversation.strategies",
    "StrategyOutcome": "unified_memory.conversation.strategies",
    "load_strategies": "unified_memory.conversation.strategies",
    "load_short_term_strategy": "unified_memory.conversation.strategies",
    "load_long_term_strategy": "unified_memory.conversation.strategies",
}

__all__ = [
    "UnifiedMemory", "RemoteMemory", "MemoryClient", "remember", "register_store", "get_store",
    "MemoryEvent", "MemoryTool", "memory_tools", "remember_tool", "recall_tool", "run_tool_call",
    "LLMExtractor", "OpenAICompatibleLLM", "as_llm", "ExtractiveSummarizer", "LLMSummarizer", "Summarizer",
    "MemoryConfig", "RankingConfig", "EvictionConfig", "ContextConfig", "VectorConfig",
    "Message", "Fact", "Entity", "Triple", "Episode", "RecallHit", "ContextBlock", "Profile", "SectionUsage", "MemoryStats", "StoredItem",
    "ExtractedFact", "ExtractedEntity", "ExtractedTriple", "Extraction",
    "UnifiedMemoryError", "MemoryValueError", "MemoryTypeError", "ConfigError", "NotFoundError", "ConflictError",
    "StorageError", "ClosedError", "DependencyError", "LLMError", "AuthenticationError", "PermissionDeniedError",
    "RuleExtractor", "HeuristicImportanceScorer", "score_importance", "assess_importance", "make_token_counter",
    "Embedder", "Extractor", "ImportanceScorer", "LLM", "Reranker", "TokenCounter", "VectorIndex",
    "Conversation", "ConversationState", "ConversationLog", "CompactionConfig", "CompactionStats",
    "SummarizationConfig", "ToolTruncationConfig", "compact", "context_window", "register_model",
    "ConversationStore", "InMemoryConversationStore", "JSONConversationStore", "SQLiteConversationStore",
    "RedisConversationStore", "PostgresConversationStore", "StoreUnavailableError", "StorageUnavailableError", "IngestReport", "ingest_file",
    "MemoryMaxTokensStrategy", "MemoryMaxMessagesStrategy", "SummarizerStrategy", "NeuralyzerStrategy",
    "MemoryStrategies", "StrategyOutcome", "load_strategies", "load_short_term_strategy", "load_long_term_strategy",
    "Redactor", "SecretRedactor", "redact_secrets",
    "__version__",
]

if TYPE_CHECKING:
    from scoring.importance import HeuristicImportanceScorer, assess_importance, score_importance
    from tiers.sessions import (
        InMemoryConversationStore,
        JSONConversationStore,
        PostgresConversationStore,
        RedisConversationStore,
        SQLiteConversationStore,
    )
    from unified_memory.agents.llm import OpenAICompatibleLLM, as_llm
    from unified_memory.agents.remember import get_store, register_store, remember
    from unified_memory.agents.tools import (
        MemoryTool,
        memory_tools,
        recall_tool,
        remember_tool,
        run_tool_call,
    )
    from unified_memory.conversation.compaction import (
        CompactionConfig,
        CompactionStats,
        SummarizationConfig,
        ToolTruncationConfig,
        compact,
    )
    from unified_memory.conversation.engine import Conversation
    from unified_memory.conversation.log import ConversationLog
    from unified_memory.conversation.model_windows import context_window, register_model
    from unified_memory.conversation.state import ConversationState
    from unified_memory.conversation.strategies import (
        MemoryMaxMessagesStrategy,
        MemoryMaxTokensStrategy,
        MemoryStrategies,
        NeuralyzerStrategy,
        StrategyOutcome,
        SummarizerStrategy,
        load_long_term_strategy,
        load_short_term_strategy,
        load_strategies,
    )
    from unified_memory.events import MemoryEvent
    from unified_memory.extraction.llm_extractor import LLMExtractor
    from unified_memory.extraction.rules import RuleExtractor
    from unified_memory.extraction.summarizers import ExtractiveSummarizer, LLMSummarizer
    from unified_memory.io.ingest import IngestReport, ingest_file
    from unified_memory.memory import UnifiedMemory
    from unified_memory.privacy.secrets import SecretRedactor, redact_secrets
    from unified_memory.protocols import (
        LLM,
        ConversationStore,
        Embedder,
        Extractor,
        ImportanceScorer,
        MemoryClient,
        Redactor,
        Reranker,
        Summarizer,
        TokenCounter,
        VectorIndex,
    )
    from unified_memory.remote.client import RemoteMemory
    from unified_memory.retrieval.tokens import make_token_counter


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'unified_memory' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
