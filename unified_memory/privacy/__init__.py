"""Keeping secrets and forgotten data out: the secret patterns and SecretRedactor, the redaction
applied to every write path, and forgetting a user or some items so nothing readable is left.
"""
