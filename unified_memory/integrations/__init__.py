"""Adapters that plug the memory into agent frameworks, each behind its own extra and imported
only when used:

- :mod:`unified_memory.integrations.llama_index` (``unified-memory[llama-index]``): a LlamaIndex memory block;
- :mod:`unified_memory.integrations.openai_agents` (``unified-memory[openai-agents]``): an Agents SDK session;
- :mod:`unified_memory.integrations.langgraph` (``unified-memory[langgraph]``): a LangGraph store;
- :mod:`unified_memory.integrations.autogen` (``unified-memory[autogen]``): an AutoGen ``Memory``;
- :mod:`unified_memory.integrations.google_adk` (``unified-memory[google-adk]``): an ADK memory service;
- :mod:`unified_memory.integrations.crewai` (``unified-memory[crewai]``): CrewAI's memory storage.
"""
