"""Keeping secrets and forgotten data out: the secret patterns and SecretRedactor, and the
redaction applied to every write path.
"""
