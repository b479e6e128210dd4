"""Secret redaction: scrub API keys, credentials, e-mail addresses, phone numbers and
card numbers out of text before it is stored.

A redactor is any callable ``str -> str`` (:class:`~unified_memory.protocols.Redactor`).
:class:`SecretRedactor` is the built-in one; pass it (or your own) as
``UnifiedMemory(..., redactor=...)`` or ``Conversation(redactor=...)``, or turn it on
with ``MemoryConfig(redact_secrets=True)``.

    >>> redact_secrets("mail ada@example.com or call (555) 123-4567, key sk-proj-abcdefghijklmnopqrstuvwx")
    'mail [REDACTED:email] or call [REDACTED:phone], key [REDACTED:api_key]'

Every pattern is precompiled and anchored so that no input makes it backtrack
more than a bounded amount per position (possessive quantifiers, bounded repeats,
look-behinds that allow one start per run of token characters): redaction takes
time linear in the text. Redacting twice changes nothing more than redacting once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from unified_memory.errors import invalid, wrong_type
from unified_memory.protocols import Redactor

__all__ = ["SecretRedactor", "Redactor", "redact_secrets", "KINDS"]

#: What :class:`SecretRedactor` detects, in the order it looks for them.
KINDS: tuple[str, ...] = ("private_key", "jwt", "bearer", "api_key", "credential", "email", "credit_card", "phone")

_PRIVATE_KEY = re.compile(
    r"-----BEGIN(?: [A-Z0-9]{1,20}){0,3} PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[A-Za-z0-9+/=\s:,.]|-(?!----))*+"  # base64 and header lines, up to the next "-----"
    r"(?:-----END(?: [A-Z0-9]{1,20}){0,3} PRIVATE KEY(?: BLOCK)?-----)?")  # a truncated key goes too

_JWT = re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{5,}+\.eyJ[A-Za-z0-9_\-]{5,}+\.[A-Za-z0-9_\-]*+")

_BEARER = re.compile(r"(?<![A-Za-z0-9_])(?P<keep>[Bb]earer[ \t]++)(?P<secret>[A-Za-z0-9\-._~+/]{8,}+=*+)")

_API_KEY = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"sk-[A-Za-z0-9_\-]{20,}+"                             # OpenAI sk-, sk-proj-; Anthropic sk-ant-
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}+"           # Stripe secret and restricted keys
    r"|(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{30,}+"                        # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{30,}+"                      # GitHub fine-grained tokens
    r"|xox[baprs]-[A-Za-z0-9\-]{10,}+"                     # Slack
    r"|AIza[A-Za-z0-9_\-]{30,}+"                           # Google API keys
    r")")

_SECRET_NAME = (r"(?:api[_\-]?key|apikey|api[_\-]?secret|access[_\-]?key(?:[_\-]?id)?|client[_\-]?secret"
                r"|secret[_\-]?key|secret|passwd|password|passphrase|pwd|private[_\-]?key"
                r"|(?:auth|access|refresh|session|bearer|api)[_\-]?token|token)")
_CREDENTIAL = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?P<keep>" + _SECRET_NAME + r"[\"']?[ \t]{0,8}[:=][ \t]{0,8})"
    r"(?:\"(?P<dq>[^\"\n]{1,512}+)\"|'(?P<sq>[^'\n]{1,512}+)'|(?P<bare>[^\s\"'`\[\]<>,;&(){}\\]{1,512}+))")
_SECRET_FIELD = re.compile(r"(?i)(?:^|[_\-])" + _SECRET_NAME + r"$")

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]{1,64}+@(?:[A-Za-z0-9\-]{1,63}+\.){1,8}[A-Za-z]{2,24}"
    r"(?![A-Za-z0-9\-]|\.[A-Za-z0-9])")

_CARD = re.compile(r"(?<![0-9])[2-6][0-9](?:[ \-]?[0-9]){11,17}(?![0-9])")
_CARD_SEPARATOR = re.compile(r"[ \-]")

_PHONE_INTERNATIONAL = re.compile(
    r"(?<![A-Za-z0-9+])\+[1-9][0-9]{0,2}+(?:[ .\-]?+\(?+[0-9]{1,4}+\)?+){2,6}+(?![0-9])")
_PHONE_NANP = re.compile(
    r"(?<![A-Za-z0-9.+\-])(?:1(?P<s0>[ .\-]))?(?:\([0-9]{3}\)(?P<s1>[ .\-]?)|[0-9]{3}(?P<s2>[.\-]))"
    r"[0-9]{3}(?P<s3>[ .\-])[0-9]{4}(?![A-Za-z0-9]|[.\-][0-9])")
_DIGIT = re.compile(r"[0-9]")


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn checksum of payment card numbers.

    >>> luhn_valid("4111111111111111"), luhn_valid("4111111111111112")
    (True, False)
    """
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card_layout(groups: list[str]) -> bool:
    """Digits written as cards are: one run, 4-4-4-4 (-3), or American Express / Diners 4-6-5 / 4-6-4."""
    return len(groups) == 1 or [len(g) for g in groups] in ([4, 4, 4, 4], [4, 4, 4, 4, 3], [4, 6, 5], [4, 6, 4])


def _issuer_prefix(digits: str) -> bool:
    """Whether the number starts like a card of a network: Visa 4, Mastercard 51-55 and
    2221-2720, Amex 34 / 37, Diners 300-305 / 36 / 38-39, JCB 3528-3589, Discover 6011 /
    644-649 / 65, UnionPay 62. (Years: 20xx and 21xx are none of these.)"""
    two, four = int(digits[:2]), int(digits[:4])
    return (digits[0] == "4" or 51 <= two <= 55 or 2221 <= four <= 2720 or two in (34, 36, 37, 38, 39, 62, 65)
            or 300 <= four // 10 <= 305 or 3528 <= four <= 3589 or four == 6011 or 644 <= four // 10 <= 649)


def _constant(text: str) -> Callable[[re.Match[str]], str]:
    """A re.sub replacement function that puts ``text`` in as it is (no template escapes)."""
    return lambda _match: text


class SecretRedactor:
    """The built-in :class:`~unified_memory.protocols.Redactor`: replaces each secret with
    ``replacement`` (``{kind}`` is the kind found).

    ``kinds`` (default: all of :data:`KINDS`) chooses what is scrubbed:

    - ``private_key``: PEM ``-----BEGIN ... PRIVATE KEY-----`` blocks (truncated ones too);
    - ``jwt``: JSON web tokens ``eyJ...\\.eyJ...\\....``;
    - ``bearer``: ``Bearer <token>`` (the word is kept);
    - ``api_key``: OpenAI / Anthropic ``sk-...``, AWS ``AKIA...``, GitHub ``ghp_`` / ``gho_`` /
      ``ghs_`` / ``github_pat_``, Slack ``xox?-``, Google ``AIza...``, Stripe ``sk_live_`` / ``rk_live_``;
    - ``credential``: the value of ``password: ...``, ``api_key=...``, ``secret=...``,
      ``token=...`` and similar assignments (the name is kept, also in JSON and YAML);
    - ``email``; ``credit_card``: 13-19 digits, grouped like a card, passing the Luhn check;
    - ``phone``: international ``+44 20 7946 0958`` and North American ``(555) 123-4567``,
      ``555-123-4567``, ``555.123.4567`` (not dates, times, versions, ids or plain numbers).

    >>> redactor = SecretRedactor(kinds=["email"], replacement="<{kind}>")
    >>> redactor("ada@example.com, 555-123-4567")
    '<email>, 555-123-4567'
    >>> SecretRedactor()('{"password": "hunter2", "when": "2023-05-08T13:56:00Z"}')
    '{"password": "[REDACTED:credential]", "when": "2023-05-08T13:56:00Z"}'
    """

    def __init__(self, kinds: Iterable[str] | None = None, *, replacement: str = "[REDACTED:{kind}]") -> None:
        if kinds is None:
            chosen = KINDS
        else:
            if isinstance(kinds, str) or not isinstance(kinds, Iterable):
                raise wrong_type("kinds", "a list of kinds", kinds)
            wanted = list(kinds)
            unknown = [k for k in wanted if k not in KINDS]
            if unknown:
                raise invalid("kinds", f"unknown kinds {unknown}; known: {', '.join(KINDS)}")
            chosen = tuple(k for k in KINDS if k in wanted)
        if not isinstance(replacement, str):
            raise wrong_type("replacement", "str", replacement)
        try:
            rendered = {kind: replacement.format(kind=kind) for kind in KINDS}
        except (KeyError, IndexError, ValueError) as exc:
            raise invalid("replacement", f"a format with at most {{kind}} in it, got {replacement!r} ({exc})") from None
        if any(not text.strip() for text in rendered.values()):
            raise invalid("replacement", "must not be empty or blank")
        self.kinds: tuple[str, ...] = chosen
        self.replacement = replacement
        self._rendered = rendered
        # re.sub reads a str replacement as a template ("\\x" would be an escape): the marks go in as they are
        self._literal: dict[str, Callable[[re.Match[str]], str]] = {
            kind: _constant(text) for kind, text in rendered.items()}
        self._passes: list[Callable[[str], str]] = [getattr(self, f"_{kind}") for kind in chosen]
        for kind in chosen:
            if self._once(rendered[kind]) != rendered[kind]:
                raise invalid("replacement", f"{rendered[kind]!r} would itself be redacted")

    def __call__(self, text: str) -> str:
        """The text with every secret of the chosen kinds replaced.

        >>> SecretRedactor()("Authorization: Bearer abc123def456ghi789")
        'Authorization: Bearer [REDACTED:bearer]'
        """
        if not isinstance(text, str):
            raise wrong_type("text", "str", text)
        out = self._once(text)
        for _ in range(4):  # a replacement can expose another match; stop at the fixed point
            if out == text:
                break
            text, out = out, self._once(out)
        return out

    def redact_field(self, name: str, value: str) -> str:
        """Redact a named value, as in metadata: the whole value when the name says it is a
        secret (``password``, ``api_key``, ``OPENAI_API_KEY``...) and credentials are
        scrubbed, else like :meth:`__call__`.

        >>> SecretRedactor().redact_field("db_password", "hunter2"), SecretRedactor().redact_field("city", "Lisbon")
        ('[REDACTED:credential]', 'Lisbon')
        """
        if not isinstance(name, str):
            raise wrong_type("name", "str", name)
        if not isinstance(value, str):
            raise wrong_type("value", "str", value)
        if "credential" in self.kinds and _SECRET_FIELD.search(name) and value.strip():
            return self._rendered["credential"]
        return self(value)

    def __repr__(self) -> str:
        return f"SecretRedactor(kinds={list(self.kinds)!r}, replacement={self.replacement!r})"

    # -- one pass per kind -----------------------------------------------------------------

    def _once(self, text: str) -> str:
        for apply in self._passes:
            text = apply(text)
        return text

    def _private_key(self, text: str) -> str:
        return _PRIVATE_KEY.sub(self._literal["private_key"], text) if "-----BEGIN" in text else text

    def _jwt(self, text: str) -> str:
        return _JWT.sub(self._literal["jwt"], text) if "eyJ" in text else text

    def _bearer(self, text: str) -> str:
        mark = self._rendered["bearer"]

        def replace(match: re.Match[str]) -> str:
            secret = match.group("secret")
            if secret.startswith(mark) or not _DIGIT.search(secret):  # "the bearer of bad news"
                return match.group(0)
            return match.group("keep") + mark

        return _BEARER.sub(replace, text) if "earer" in text else text

    def _api_key(self, text: str) -> str:
        return _API_KEY.sub(self._literal["api_key"], text)

    def _credential(self, text: str) -> str:
        mark = self._rendered["credential"]

        def replace(match: re.Match[str]) -> str:
            for group, quote in (("dq", '"'), ("sq", "'"), ("bare", "")):
                value = match.group(group)
                if value is not None:
                    if value.startswith(mark):
                        return match.group(0)
                    return f"{match.group('keep')}{quote}{mark}{quote}"
            return match.group(0)  # pragma: no cover - one group always matches

        return _CREDENTIAL.sub(replace, text) if ":" in text or "=" in text else text

    def _email(self, text: str) -> str:
        return _EMAIL.sub(self._literal["email"], text) if "@" in text else text

    def _credit_card(self, text: str) -> str:
        mark = self._rendered["credit_card"]

        def replace(match: re.Match[str]) -> str:
            found = match.group(0)
            separators = set(_CARD_SEPARATOR.findall(found))
            if len(separators) > 1:
                return found
            groups = _CARD_SEPARATOR.split(found)
            while sum(len(g) for g in groups) >= 13:  # "4111 1111 1111 1111 20": the card, then 20
                digits = "".join(groups)
                if len(digits) <= 19 and _card_layout(groups) and _issuer_prefix(digits) and luhn_valid(digits):
                    kept = len(" ".join(groups))
                    return mark + found[kept:]
                groups = groups[:-1]
            return found

        return _CARD.sub(replace, text) if _DIGIT.search(text) else text

    def _phone(self, text: str) -> str:
        if not _DIGIT.search(text):
            return text
        mark = self._rendered["phone"]

        def international(match: re.Match[str]) -> str:
            digits = len(_DIGIT.findall(match.group(0)))
            return mark if 8 <= digits <= 15 else match.group(0)

        def national(match: re.Match[str]) -> str:
            s2, s3 = match.group("s2"), match.group("s3")
            if s2 is not None and s2 != s3:  # 555-123-4567, 555.123.4567; not 555.123-4567
                return match.group(0)
            return mark

        return _PHONE_NANP.sub(national, _PHONE_INTERNATIONAL.sub(international, text))


_DEFAULT: SecretRedactor | None = None


def redact_secrets(text: str) -> str:
    """Redact every kind of secret with a default :class:`SecretRedactor`.

    >>> redact_secrets("my key is AKIAIOSFODNN7EXAMPLE and card 4111 1111 1111 1111")
    'my key is [REDACTED:api_key] and card [REDACTED:credit_card]'
    >>> redact_secrets("v1.2.3 released 2023-05-08 at 13:56, build 20230508")
    'v1.2.3 released 2023-05-08 at 13:56, build 20230508'
    """
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = SecretRedactor()
    return _DEFAULT(text)
