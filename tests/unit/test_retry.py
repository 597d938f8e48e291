"""The one backoff every retried call waits by: doubling, jittered, a Retry-After first."""

from __future__ import annotations

import pytest

from lorehouse.retry import backoff_seconds


def test_waits_double_per_retry_within_their_jitter() -> None:
    for retry, middle in [(1, 2.0), (2, 4.0), (3, 8.0)]:
        waits = [backoff_seconds(retry, 2.0) for _ in range(200)]
        assert all(0.5 * middle <= wait < 1.5 * middle for wait in waits)
        # Jittered: workers that failed together do not come back together.
        assert len(set(waits)) > 100


def test_a_service_asking_for_a_wait_gets_it_and_at_most_a_tenth_more() -> None:
    waits = [backoff_seconds(1, 2.0, asked_seconds=30.0) for _ in range(200)]
    assert all(30.0 <= wait <= 33.0 for wait in waits)
    assert backoff_seconds(3, 2.0, asked_seconds=0.0) == 0.0


def test_retries_are_counted_from_one() -> None:
    with pytest.raises(ValueError, match="from 1"):
        backoff_seconds(0, 1.0)
