"""Geometry for the console's pictures, drawn as inline SVG by the templates (no script): the
bars of facts over time, and an entity's neighbourhood laid out in rings around it.

    >>> bars = timeline_bars([3, 0, 6], width=300, height=100)
    >>> [(b.x, b.height) for b in bars]
    [(0.0, 45.0), (100.0, 0.0), (200.0, 90.0)]
    >>> picture = neighbourhood("Ada", [Edge("Ada", "lives_in", "Berlin"), Edge("Berlin", "in", "Germany")])
    >>> [(n.name, n.ring) for n in picture.nodes]
    [('Ada', 0), ('Berlin', 1), ('Germany', 2)]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Bar", "timeline_bars", "Edge", "Node", "Line", "Picture", "neighbourhood", "MAX_NODES", "WIDTH",
           "HEIGHT"]

#: The most entities one picture draws (the closest first); the table beside it lists every relation.
MAX_NODES = 40
WIDTH, HEIGHT = 800, 720
_RINGS = (0.0, 150.0, 290.0)


@dataclass(frozen=True)
class Bar:
    """One bar of a chart: its left edge, top, width and height in the SVG's units."""

    x: float
    y: float
    width: float
    height: float
    count: int


def timeline_bars(counts: Sequence[int], *, width: float = 600, height: float = 140, gap: float = 2) -> list[Bar]:
    """Bars for ``counts`` side by side, scaled to the largest (which takes 90% of ``height``)."""
    if not counts:
        return []
    top = max(max(counts), 1)
    step = width / len(counts)
    bars = []
    for i, count in enumerate(counts):
        tall = round(height * 0.9 * count / top, 1)
        bars.append(Bar(round(i * step, 1), round(height - tall, 1), round(max(step - gap, 1), 1), tall, count))
    return bars


@dataclass(frozen=True)
class Edge:
    """A relation to draw: ``subject --predicate--> object``, ``ended`` when no longer true."""

    subject: str
    predicate: str
    object: str
    ended: bool = False
    until: str = ""


@dataclass(frozen=True)
class Node:
    """An entity placed at (``x``, ``y``); ``ring`` 0 is the entity looked at, 1 its neighbours."""

    name: str
    x: float
    y: float
    ring: int


@dataclass(frozen=True)
class Line:
    """A relation drawn from one node to another, its label at (``lx``, ``ly``)."""

    edge: Edge
    x1: float
    y1: float
    x2: float
    y2: float
    lx: float
    ly: float


@dataclass(frozen=True)
class Picture:
    """The nodes and lines of a neighbourhood, and how many entities were left out."""

    nodes: list[Node]
    lines: list[Line]
    left_out: int
    width: int = WIDTH
    height: int = HEIGHT


def neighbourhood(center: str, edges: Sequence[Edge], *, max_nodes: int = MAX_NODES) -> Picture:
    """``center`` in the middle, the entities one relation away evenly on a ring around it, those two
    away on an outer ring, each near the neighbour it was reached through (within that neighbour's
    share of the circle); at most ``max_nodes`` in all, nearest first. The relations between drawn
    entities are the lines."""
    names: dict[str, str] = {}
    links: dict[str, list[str]] = {}
    for edge in edges:
        ka, kb = edge.subject.casefold(), edge.object.casefold()
        names.setdefault(ka, edge.subject)
        names.setdefault(kb, edge.object)
        links.setdefault(ka, []).append(kb)
        links.setdefault(kb, []).append(ka)
    key = center.casefold()
    names.setdefault(key, center)
    first = sorted(dict.fromkeys(k for k in links.get(key, []) if k != key), key=lambda k: names[k].casefold())
    parent: dict[str, str] = {}
    for k in first:
        for other in links.get(k, []):
            if other != key and other not in first and other not in parent:
                parent[other] = k
    rest = sorted((k for k in names if k != key and k not in first and k not in parent), key=lambda k: names[k])
    drawn = [key, *first, *sorted(parent, key=lambda k: (first.index(parent[k]), names[k].casefold())), *rest]
    left_out = max(0, len(drawn) - max_nodes)
    drawn = drawn[:max_nodes]
    cx, cy = WIDTH / 2, HEIGHT / 2
    nodes: dict[str, Node] = {key: Node(names[key], cx, cy, 0)}
    ring1 = [k for k in drawn if k in first]
    share = 2 * math.pi / max(len(ring1), 1)
    angles = {k: share * i - math.pi / 2 for i, k in enumerate(ring1)}
    for k, angle in angles.items():
        nodes[k] = Node(names[k], round(cx + _RINGS[1] * math.cos(angle), 1), round(cy + _RINGS[1] * math.sin(angle), 1), 1)
    outer = [k for k in drawn if k in parent or k in rest]
    groups: dict[str | None, list[str]] = {}
    for k in outer:
        groups.setdefault(parent.get(k), []).append(k)
    free = [2 * math.pi * i / max(len(groups.get(None, [])), 1) for i in range(len(groups.get(None, [])))]
    for via, members in groups.items():
        for i, k in enumerate(members):
            if via is None:
                angle = free[i]
            else:  # spread over the middle of the neighbour's share of the circle
                angle = angles[via] + share * 0.8 * ((i + 0.5) / len(members) - 0.5)
            nodes[k] = Node(names[k], round(cx + _RINGS[2] * math.cos(angle), 1),
                            round(cy + _RINGS[2] * math.sin(angle), 1), 2)
    lines: list[Line] = []
    pairs: dict[frozenset[str], int] = {}
    for edge in edges:
        a, b = nodes.get(edge.subject.casefold()), nodes.get(edge.object.casefold())
        if a is None or b is None or a is b:
            continue
        pair = frozenset((a.name, b.name))
        nth = pairs[pair] = pairs.get(pair, -1) + 1  # a second relation between the same two: label below
        # the label two thirds of the way out, where the lines of a busy entity have spread apart
        t = 0.5 if a.ring == b.ring else (0.68 if b.ring > a.ring else 0.32)
        lines.append(Line(edge, a.x, a.y, b.x, b.y, round(a.x + (b.x - a.x) * t, 1),
                          round(a.y + (b.y - a.y) * t + 14 * nth, 1)))
    return Picture(list(nodes.values()), lines, left_out)
