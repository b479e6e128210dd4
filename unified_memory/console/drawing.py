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
WIDTH, HEIGHT = 800, 720  # the smallest picture; a larger neighbourhood makes it larger
_RING = 150.0  # the neighbours' ring, at least
_FAN = 130.0  # the entities reached through a neighbour: at least this far from it
_APART = 110.0  # between two neighbours on the ring, at least
_FAN_APART = 95.0  # between two entities of one fan, at least
_MARGIN_X, _MARGIN_Y = 80.0, 50.0  # room around the outermost nodes for their names


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
    """A relation drawn from one node to another, its label at (``lx``, ``ly``) turned by
    ``angle`` degrees to run along the line (never upside down)."""

    edge: Edge
    x1: float
    y1: float
    x2: float
    y2: float
    lx: float
    ly: float
    angle: float = 0.0
    dy: float = -4.0  # the label's baseline this far below (negative: above) the line, across it


@dataclass(frozen=True)
class Picture:
    """The nodes and lines of a neighbourhood, how many entities were left out, and the box that
    holds them (the SVG's ``viewBox``: ``x``, ``y``, ``width``, ``height``)."""

    nodes: list[Node]
    lines: list[Line]
    left_out: int
    width: int = WIDTH
    height: int = HEIGHT
    x: int = 0
    y: int = 0


def neighbourhood(center: str, edges: Sequence[Edge], *, max_nodes: int = MAX_NODES) -> Picture:
    """``center`` in the middle, the entities one relation away evenly on a ring around it (wider
    as they are more), those two away in a fan around the neighbour they were reached through,
    turned away from the centre (wider and farther as the fan holds more); at most ``max_nodes`` in
    all, nearest first. The relations between drawn entities are the lines, each label along its
    line; the picture's box fits what is drawn."""
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
    nodes: dict[str, Node] = {key: Node(names[key], 0.0, 0.0, 0)}
    ring1 = [k for k in drawn if k in first]
    share = 2 * math.pi / max(len(ring1), 1)
    radius = max(_RING, _APART / (2 * math.sin(share / 2)) if len(ring1) > 1 else 0.0)  # neighbours _APART apart
    angles = {k: share * i - math.pi / 2 for i, k in enumerate(ring1)}
    for k, angle in angles.items():
        nodes[k] = Node(names[k], round(radius * math.cos(angle), 1), round(radius * math.sin(angle), 1), 1)
    groups: dict[str | None, list[str]] = {}
    for k in drawn:
        if k in parent or k in rest:
            groups.setdefault(parent.get(k), []).append(k)
    for via, members in groups.items():
        if via is None:  # reached through no neighbour: evenly on a ring outside the fans
            far = radius + 2 * _FAN + _FAN_APART
            for i, k in enumerate(members):
                angle = 2 * math.pi * i / len(members) - math.pi / 2
                nodes[k] = Node(names[k], round(far * math.cos(angle), 1), round(far * math.sin(angle), 1), 2)
            continue
        hub = nodes[via]
        window = min(math.pi, max(share, math.pi / 3))  # the fan's angle, facing away from the centre
        step = window / len(members)  # between two members, seen from the neighbour: _FAN_APART apart
        reach = max(_FAN, _FAN_APART / (2 * math.sin(step / 2)) if len(members) > 1 else 0.0)
        for i, k in enumerate(members):
            angle = angles[via] + step * (i + 0.5) - window / 2
            nodes[k] = Node(names[k], round(hub.x + reach * math.cos(angle), 1), round(hub.y + reach * math.sin(angle), 1), 2)
    lines: list[Line] = []
    pairs: dict[frozenset[str], int] = {}
    for edge in edges:
        a, b = nodes.get(edge.subject.casefold()), nodes.get(edge.object.casefold())
        if a is None or b is None or a is b:
            continue
        pair = frozenset((a.name, b.name))
        nth = pairs[pair] = pairs.get(pair, -1) + 1  # a second relation between the same two: one line lower
        # the label past the middle of a fan's line, away from its hub, where the lines have spread
        t = 0.5 if a.ring == b.ring or 0 in (a.ring, b.ring) else (0.6 if b.ring > a.ring else 0.4)
        angle = math.degrees(math.atan2(b.y - a.y, b.x - a.x))
        angle = angle - 180 if angle > 90 else angle + 180 if angle < -90 else angle  # never upside down
        lines.append(Line(edge, a.x, a.y, b.x, b.y, round(a.x + (b.x - a.x) * t, 1),
                          round(a.y + (b.y - a.y) * t, 1), round(angle, 1), -4.0 + 13 * nth))
    return _fitted(Picture(list(nodes.values()), lines, left_out))


def _fitted(picture: Picture) -> Picture:
    """The picture with its box around what it draws (at least :data:`WIDTH` x :data:`HEIGHT`,
    centred on what it draws), names and labels included."""
    xs = [n.x for n in picture.nodes]
    ys = [n.y for n in picture.nodes]
    left, right = min(xs) - _MARGIN_X, max(xs) + _MARGIN_X
    top, bottom = min(ys) - _MARGIN_Y, max(ys) + _MARGIN_Y
    width, height = max(right - left, WIDTH), max(bottom - top, HEIGHT)
    x, y = (left + right - width) / 2, (top + bottom - height) / 2
    return Picture(picture.nodes, picture.lines, picture.left_out, math.ceil(width), math.ceil(height),
                   math.floor(x), math.floor(y))
