"""Memory as a service: the HTTP JSON API (FastAPI), the MCP server, and the API keys that keep
tenants apart. Needs the ``server`` extra (``pip install 'unified-memory[server]'``); importing
``unified_memory`` alone never loads it.
"""
