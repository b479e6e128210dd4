"""Memory inside an agent: the @remember decorator, ready-made remember/recall tools, and the
chat-model adapters that LLM extraction and summaries use.
"""
