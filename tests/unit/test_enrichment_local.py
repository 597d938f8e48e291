"""The bundled Gemma 3 270M enriching real chunks, end to end through litellm."""

from __future__ import annotations

from pathlib import Path

import pytest

from lorehouse.enrichment import CHUNK_PROMPT, ChunkEnrichment
from lorehouse.llm import LLMClient, LLMFailure, load_prompt

#: One passage with the facts enrichment has to carry (numbers, a role). Each
#: generation costs the 2-core machine about 25 s; more passages test the same path again.
PASSAGE = (
    "A SEV1 incident must be acknowledged within 5 minutes, with status updates every 30 "
    "minutes until it is resolved. The incident commander informs clients."
)


@pytest.mark.timeout(900)
def test_local_model_enriches_a_chunk(tmp_path_factory: pytest.TempPathFactory) -> None:
    models_dir: Path = tmp_path_factory.getbasetemp() / "models"
    client = LLMClient("local", models_dir=models_dir, max_output_tokens=200, max_attempts=1)
    # 270M parameters: answers are often poor, but the grammar-constrained path must produce
    # schema-valid output (greedy decoding, so the same passage gives the same answer).
    try:
        answer = client.complete(
            load_prompt(CHUNK_PROMPT),
            ChunkEnrichment,
            title="Fernhill policies",
            breadcrumb="Policies",
            text=PASSAGE,
        )
    except LLMFailure as failure:
        pytest.fail(f"the local model gave no schema-valid enrichment: {failure}")
    value = answer.value
    assert 2 <= len(value.faqs) <= 4
    assert 3 <= len(value.keywords) <= 8
    assert all(question.strip() for question in value.faqs)
    assert client.usage.calls == 1
    assert client.usage.tokens_out > 0
    assert client.usage.cost_usd == 0.0
