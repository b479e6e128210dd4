"""Searchable documents of conversation turns that carry their neighbour turns.

A reply such as "Yes! It was the best week of my life" says nothing about
*what* was great; the turn before it does. So the document a message is
searched by holds its own text twice (it counts most) and the text of up to
``width`` turns before and after it in the same conversation: the same
agent and session, with no pause longer than ``max_gap`` seconds between
consecutive turns. Parts are joined by :data:`PART_SEP`, which the lexical
analyzer treats as a word break; the dense index embeds each part once
(cached by content) and searches by their normalised sum (see
:func:`split_parts`).

    >>> turns = [ConversationTurn("m1", ("", "s"), 0.0, "Did you like Paris?"),
    ...          ConversationTurn("m2", ("", "s"), 60.0, "Yes, loved it")]
    >>> split_parts(dict(neighbor_documents(turns, width=1, max_gap=3600))["m2"])
    ['Yes, loved it', 'Yes, loved it', 'Did you like Paris?']
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import NamedTuple

__all__ = ["PART_SEP", "ConversationTurn", "neighbor_documents", "split_parts", "OWN_WEIGHT"]

PART_SEP = "\x1f"  # ASCII unit separator: never typed by users, not a word character
OWN_WEIGHT = 2  # the turn's own text is repeated this often in its document


class ConversationTurn(NamedTuple):
    """A logged message as far as neighbour documents need it (given in log order)."""

    id: str
    conversation: tuple[str, str]  # (agent_id, session_id) as stored
    created_at: float
    text: str


def _runs(turns: Iterable[ConversationTurn], max_gap: float) -> list[list[ConversationTurn]]:
    """Turns split into runs: one conversation, no pause longer than ``max_gap``."""
    by_conversation: dict[tuple[str, str], list[ConversationTurn]] = defaultdict(list)
    for turn in turns:
        by_conversation[turn.conversation].append(turn)
    runs: list[list[ConversationTurn]] = []
    for conversation in by_conversation.values():
        run: list[ConversationTurn] = []
        for turn in conversation:
            if run and turn.created_at - run[-1].created_at > max_gap:
                runs.append(run)
                run = []
            run.append(turn)
        runs.append(run)
    return runs


def neighbor_documents(turns: Sequence[ConversationTurn], *, width: int, max_gap: float,
                       targets: Collection[str] | None = None) -> list[tuple[str, str]]:
    """``(id, document)`` for each turn (or only those in ``targets``), neighbours from ``turns``.

    ``turns`` are in log order; ``width=0`` gives each turn its own text alone.

    >>> turns = [ConversationTurn(f"m{i}", ("", ""), 60.0 * i, f"t{i}") for i in range(3)]
    >>> [doc.count(PART_SEP) for _, doc in neighbor_documents(turns, width=1, max_gap=120)]
    [2, 3, 2]
    """
    if width < 0:
        raise ValueError(f"width: must be >= 0, got {width!r}")
    documents: list[tuple[str, str]] = []
    for run in _runs(turns, max_gap):
        for position, turn in enumerate(run):
            if targets is not None and turn.id not in targets:
                continue
            parts = [turn.text] * (OWN_WEIGHT if width else 1)
            for step in range(1, width + 1):
                for index in (position - step, position + step):
                    if 0 <= index < len(run):
                        parts.append(run[index].text)
            documents.append((turn.id, PART_SEP.join(parts)))
    return documents


def split_parts(document: str) -> list[str]:
    """The texts a document was joined from (a plain text is one part).

    >>> split_parts("a" + PART_SEP + "b"), split_parts("plain")
    (['a', 'b'], ['plain'])
    """
    return document.split(PART_SEP)
