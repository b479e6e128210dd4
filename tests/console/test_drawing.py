"""The graph picture's geometry: a busy entity's neighbours and fans keep apart, every label runs
along its line and reads upright, and the picture's box holds everything it draws."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from unified_memory.console.drawing import HEIGHT, WIDTH, Edge, neighbourhood


def _distance(a, b) -> float:
    return math.hypot(a.x - b.x, a.y - b.y)


@settings(max_examples=150, deadline=None)
@given(neighbours=st.integers(1, 30), fans=st.lists(st.integers(0, 14), max_size=30))
def test_a_busy_neighbourhood_keeps_its_entities_apart_and_inside_the_picture(neighbours, fans):
    edges = [Edge("Ada", f"rel{i}", f"N{i}") for i in range(neighbours)]
    for i, size in enumerate(fans[:neighbours]):
        edges += [Edge(f"N{i}", "has", f"N{i}-{j}") for j in range(size)]
    picture = neighbourhood("Ada", edges, max_nodes=1000)
    ring1 = [n for n in picture.nodes if n.ring == 1]
    assert len(ring1) == neighbours
    for a, b in itertools.combinations(ring1, 2):
        assert _distance(a, b) >= 109  # a wider ring for more neighbours, never crowded
    for i, size in enumerate(fans[:neighbours]):
        fan = [n for n in picture.nodes if n.name.startswith(f"N{i}-")]
        assert len(fan) == size
        for a, b in itertools.combinations(fan, 2):
            assert _distance(a, b) >= 90  # a fan grows with its entities
    for node in picture.nodes:  # every node, its name included, inside the box
        assert picture.x + 60 <= node.x <= picture.x + picture.width - 60
        assert picture.y + 30 <= node.y <= picture.y + picture.height - 30
    assert picture.width >= WIDTH and picture.height >= HEIGHT
    for line in picture.lines:
        assert -90 <= line.angle <= 90  # never upside down
        along = math.degrees(math.atan2(line.y2 - line.y1, line.x2 - line.x1))
        assert min(abs(along - line.angle) % 180, 180 - abs(along - line.angle) % 180) < 0.1  # along the line
        assert min(line.x1, line.x2) - 0.1 <= line.lx <= max(line.x1, line.x2) + 0.1  # on it


def test_the_fan_of_a_neighbour_faces_away_from_the_centre():
    edges = [Edge("Maria", "has_sister", "Ada", ), Edge("Maria", "lives_in", "Porto")]
    edges += [Edge("Ada", "likes", f"thing {i}") for i in range(12)]
    picture = neighbourhood("Maria", edges)
    nodes = {n.name: n for n in picture.nodes}
    centre, hub = nodes["Maria"], nodes["Ada"]
    for i in range(12):
        far = nodes[f"thing {i}"]
        assert _distance(far, centre) > _distance(hub, centre)  # beyond the neighbour, not around the centre
    assert min(_distance(nodes[f"thing {i}"], nodes[f"thing {i + 1}"]) for i in range(11)) >= 90
