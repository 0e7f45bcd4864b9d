"""retrieval.semantic: vectors as bytes, cosine, the nearest, linear fusion (pure; no model needed)."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.semantic import (
    BLOB_BYTES,
    DIM,
    FUSION,
    FUSIONS,
    METHOD,
    VectorError,
    cosines,
    from_blobs,
    fuse,
    gate_overlap,
    nearest,
    normalized,
    to_blob,
)


def _unit(seed: int) -> np.ndarray:
    return normalized(np.random.default_rng(seed).normal(size=DIM).astype(np.float32))


class TestBlobs:
    def test_a_vector_round_trips_within_float16_precision(self) -> None:
        v = _unit(1)
        back = from_blobs([to_blob(v)])[0]
        assert np.max(np.abs(back - v)) < 1e-3

    def test_a_stored_vector_is_at_most_1_kb(self) -> None:
        assert len(to_blob(_unit(2))) == BLOB_BYTES <= 1024

    def test_a_blob_of_the_wrong_size_is_refused(self) -> None:
        with pytest.raises(VectorError, match="vector 1: 767 bytes"):
            from_blobs([to_blob(_unit(3)), b"\0" * 767])

    def test_a_vector_of_the_wrong_shape_is_refused(self) -> None:
        with pytest.raises(VectorError, match="shape"):
            to_blob(np.zeros(DIM + 1, dtype=np.float32))


class TestNearest:
    def test_the_nearest_are_the_highest_cosines_best_first(self) -> None:
        m = np.stack([_unit(i) for i in range(10)])
        cos = cosines(m, m[7])
        assert nearest(cos, 3)[0] == 7
        assert [float(cos[i]) for i in nearest(cos, 3)] == sorted((float(c) for c in cos), reverse=True)[:3]

    def test_asking_for_more_than_there_are_gives_them_all(self) -> None:
        assert sorted(nearest(np.array([0.1, 0.5], dtype=np.float32), 25)) == [0, 1]

    def test_none_asked_or_none_there_gives_none(self) -> None:
        assert nearest(np.array([0.3], dtype=np.float32), 0) == []
        assert nearest(np.zeros(0, dtype=np.float32), 5) == []


class TestFuse:
    def test_the_lexical_part_is_a_share_of_the_best_score(self) -> None:
        out = fuse([(1, 8.0), (2, 4.0)], {})
        assert (out[1].lexical, out[2].lexical) == (1.0, 0.5)
        assert out[2].score == 0.5

    def test_the_cosine_is_added_with_its_weight(self) -> None:
        out = fuse([(1, 8.0), (2, 4.0)], {1: 0.1, 2: 0.9}, weight=1.0)
        assert out[2].score == pytest.approx(1.4)
        assert out[2].score > out[1].score

    def test_a_dense_only_event_joins_the_pool_with_no_lexical_part(self) -> None:
        out = fuse([(1, 8.0)], {5: 0.7})
        assert out[5].lexical == 0.0 and out[5].score == pytest.approx(0.7)

    def test_an_event_without_a_vector_ranks_on_its_lexical_share(self) -> None:
        out = fuse([(1, 8.0), (2, 6.0)], {1: 0.2})
        assert out[2].cosine is None and out[2].score == 0.75

    def test_weight_zero_keeps_the_lexical_order(self) -> None:
        out = fuse([(1, 8.0), (2, 6.0), (3, 1.0)], {3: 0.99, 2: 0.5}, weight=0.0)
        assert sorted(out, key=lambda s: -out[s].score) == [1, 2, 3]

    def test_min_max_scales_each_part_over_the_pool(self) -> None:
        out = fuse([(1, 9.0), (2, 5.0), (3, 1.0)], {1: 0.2, 2: 0.6, 4: 0.4}, 0.5, lexical_norm="minmax", cosine_norm="minmax")
        assert (out[1].lexical, out[2].lexical, out[3].lexical) == (1.0, 0.5, 0.0)
        assert (out[1].cosine_part, out[2].cosine_part, out[4].cosine_part) == pytest.approx((0.0, 1.0, 0.5))
        assert out[2].score == pytest.approx(0.5 + 0.5 * 1.0)
        assert out[4].lexical_raw is None and out[1].lexical_raw == 9.0
        assert out[3].cosine is None and out[3].score == 0.0

    def test_equal_values_scale_to_one_under_min_max(self) -> None:
        out = fuse([(1, 3.0), (2, 3.0)], {1: 0.5, 2: 0.5}, 1.0, lexical_norm="minmax", cosine_norm="minmax")
        assert out[1].score == out[2].score == 2.0

    def test_an_unknown_scaling_is_refused(self) -> None:
        with pytest.raises(ValueError, match="lexical_norm"):
            fuse([(1, 1.0)], {}, lexical_norm="z")
        with pytest.raises(ValueError, match="cosine_norm"):
            fuse([(1, 1.0)], {1: 0.3}, cosine_norm="z")


class TestFusions:
    def test_v1_is_still_named_and_is_score_over_best_plus_the_cosine(self) -> None:
        v1 = FUSIONS["linear-fusion-v1"]
        assert (v1.lexical_pool, v1.dense_pool, v1.weight, v1.lexical_norm, v1.cosine_norm, v1.gate) == (200, 25, 1.0, "max", "raw", 0.0)
        assert v1.weight_at(0.0) == v1.weight_at(1.0) == 1.0

    def test_the_shipped_fusion_is_the_one_the_receipt_names(self) -> None:
        assert METHOD == FUSION.method and FUSIONS[METHOD] is FUSION

    def test_the_gate_lifts_the_weight_only_below_its_share(self) -> None:
        v2 = FUSIONS["linear-fusion-v2"]
        assert v2.weight_at(v2.gate) == v2.weight
        assert v2.weight_at(v2.gate - 0.01) == v2.weight * v2.gate_weight

    def test_the_overlap_is_the_share_of_terms_some_event_holds(self) -> None:
        assert gate_overlap({"dog": 3, "cello": 0, "show": 1, "leeds": 0}) == 0.5
        assert gate_overlap({}) == 1.0
