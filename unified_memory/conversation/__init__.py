"""One conversation's short-term memory: the Conversation engine, compaction, strategies, logs.
It and UnifiedMemory never import each other; the compat facades and the session stores build on it.
"""
