"""The excerpts shown beside an answer: each cited unit with its neighbours, so a reader sees
the sentence in its place.
"""

from __future__ import annotations

from collections.abc import Sequence

from lorehouse.agents.citations import DraftExcerpt
from lorehouse.agents.extractive.units import Unit

#: Units shown around a supporting sentence on each side, within its passage.
EXCERPT_NEIGHBOURS = 1


def excerpts_of(
    units: Sequence[Unit],
    lead: Sequence[Unit],
    chosen: Sequence[Unit],
    backing: set[tuple[int, int]],
) -> list[DraftExcerpt]:
    """One excerpt per passage the answer draws on, the lead's passages first: its chosen
    units with a neighbour on each side from the same part of the passage, the `backing`
    ones (by passage and order) as supports."""
    passages = list(dict.fromkeys([*(u.passage for u in lead), *(u.passage for u in chosen)]))
    position = {(u.passage, u.order): index for index, u in enumerate(units)}
    excerpts = []
    for passage in passages:
        supporting = sorted((u for u in chosen if u.passage == passage), key=lambda u: u.order)
        shown: dict[int, bool] = {}
        for unit in supporting:
            at = position[(unit.passage, unit.order)]
            for index in range(at - EXCERPT_NEIGHBOURS, at + EXCERPT_NEIGHBOURS + 1):
                if 0 <= index < len(units):
                    near = units[index]
                    if (near.passage, near.part) == (unit.passage, unit.part):
                        shown[index] = shown.get(index, False) or index == at
        ordered = sorted(shown)
        backs = {position[key] for key in backing if key[0] == passage}
        excerpts.append(
            DraftExcerpt(
                passage=passage,
                heading=supporting[0].heading,
                sentences=[units[index].text for index in ordered],
                marked=[i for i, index in enumerate(ordered) if shown[index]],
                supports=[i for i, index in enumerate(ordered) if shown[index] and index in backs],
            )
        )
    return excerpts
