"""One wait between the attempts of every call Lorehouse retries: model providers (answers,
enrichment, embeddings) and the services connectors read.

Exponential, so a provider that is briefly overloaded is asked again soon and one that stays
down is not hammered; jittered, so the many workers of a build that failed together do not
come back together; and a service's own Retry-After, when it sends one, wins over the guess.
"""

from __future__ import annotations

import random


def backoff_seconds(retry: int, base_seconds: float, asked_seconds: float | None = None) -> float:
    """Seconds to wait before the `retry`-th retry (1 for the first).

    `asked_seconds` (a Retry-After) is waited, plus up to a tenth more so that callers told
    the same second do not all return in it; otherwise `base_seconds` doubled per retry,
    times a random factor between 0.5 and 1.5.
    """
    if retry < 1:
        raise ValueError("retries are counted from 1")
    if asked_seconds is not None:
        return asked_seconds * (1 + random.random() * 0.1)
    return base_seconds * 2 ** (retry - 1) * (0.5 + random.random())
