"""Memory in and out of files: chat-log ingestion (and its formats) and JSON Lines export/import.
(Named io for the job; within the package, `import io` still means the standard library.)
"""
