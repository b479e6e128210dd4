"""Adapters that plug the memory into agent frameworks, each behind its own extra and imported
only when used: :mod:`unified_memory.integrations.llama_index` (``unified-memory[llama-index]``),
:mod:`unified_memory.integrations.openai_agents` (``unified-memory[openai-agents]``),
:mod:`unified_memory.integrations.langgraph` (``unified-memory[langgraph]``: a LangGraph store)."""
