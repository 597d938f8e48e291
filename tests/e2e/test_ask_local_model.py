"""The answer pipeline with the bundled Gemma 3 270M GGUF, through litellm, on real stores.

The model is tiny: it often echoes its prompt or rewrites a question into one of the
prompt's examples. What must hold is the pipeline's contract: every LLM step is attempted
through litellm, an unusable reply is caught by validation and degrades to the offline
method with the reason, and the response is well formed with citations into its context.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lorehouse.agents.ask import AskOptions, AskPipeline
from lorehouse.embedding.minilm import default_embedder
from lorehouse.llm import LLMClient
from lorehouse.search.retriever import Retriever
from lorehouse.stores.lance_index import ChunkIndex


@pytest.mark.slow
def test_the_local_model_answers_or_degrades_with_citations(
    materialized_sample: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    models_dir = tmp_path_factory.getbasetemp() / "models"
    client = LLMClient(
        "local", models_dir=models_dir, max_output_tokens=120, max_attempts=1, timeout_seconds=60
    )
    index = ChunkIndex(str(materialized_sample / "lancedb"))
    embedder = default_embedder()
    pipeline = AskPipeline(
        Retriever(index, embedder),
        index.documents(),
        embedder,
        client,
        AskOptions(context_chunks=3),
    )
    response = pipeline.ask("How many weeks of parental leave do primary caregivers get?", top_k=4)

    steps = {step.step: step for step in response.trace.steps}
    for name in ("query_optimizer", "source_identifier", "answerer"):
        assert steps[name].llm_calls >= 1, name
        assert steps[name].status in {"ok", "fallback"}, name
        assert steps[name].status == "ok" or steps[name].detail, name
    assert response.trace.totals()["llm_ms"] > 0
    assert response.answer and response.citations
    context = response.trace.context_chunk_ids
    # Every source cited is in the context and has its excerpt; the answer cites one at least.
    assert [excerpt.number for excerpt in response.excerpts] == [
        citation.number for citation in response.citations
    ]
    assert any(f"[{citation.number}]" in response.answer for citation in response.citations)
    for citation in response.citations:
        assert citation.chunk_id in context
    if response.mode == "llm":
        # The model cites passages by their context numbers.
        assert all(c.chunk_id == context[c.number - 1] for c in response.citations)
    else:
        # Extractive answers number their citations 1..n in the order they use them.
        assert [c.number for c in response.citations] == list(range(1, len(response.citations) + 1))
    if response.mode == "llm":
        assert not response.degraded
    else:
        assert response.degraded and response.degraded_reason
        assert steps["answerer"].status == "fallback"
