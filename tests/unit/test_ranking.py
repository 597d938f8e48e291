"""The ranking profile: the one place search's weights live, checked when it is made."""

from __future__ import annotations

import pytest

from lorehouse.search.ranking import RRF_K, RankingProfile, reciprocal_rank_fusion


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"bm25_weight": -1.0}, "bm25_weight"),
        ({"question_word_weight": -0.1}, "question_word_weight"),
        ({"rrf_k": 0.0}, "rrf_k"),
        ({"maxsim_depth": 0}, "maxsim_depth"),
        ({"cross_lingual_share": 1.5}, "cross_lingual_share"),
    ],
)
def test_a_profile_that_cannot_rank_is_refused_when_it_is_made(
    values: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        RankingProfile(**values)  # type: ignore[arg-type]


def test_fusing_weighs_bm25_by_the_profile() -> None:
    vector, bm25 = ["a", "b"], ["b", "c"]
    assert RankingProfile().fuse(vector, bm25) == reciprocal_rank_fusion([vector, bm25])
    without = RankingProfile(bm25_weight=0.0).fuse(vector, bm25)
    assert without["c"] == 0.0 and without["a"] == 1 / (RRF_K + 1)
    sharper = RankingProfile(rrf_k=1.0).fuse(vector, bm25)
    assert sharper["b"] == pytest.approx(1 / 3 + 1 / 2)
