"""The bundled Gemma 3 270M enriching real chunks, end to end through litellm."""

from __future__ import annotations

from pathlib import Path

import pytest

from lorehouse.enrichment import CHUNK_PROMPT, ChunkEnrichment
from lorehouse.llm import LLMClient, LLMFailure, load_prompt

PASSAGES = [
    "A SEV1 incident must be acknowledged within 5 minutes, with status updates every 30 "
    "minutes until it is resolved. The incident commander informs clients.",
    "Primary caregivers receive 20 weeks of fully paid parental leave; secondary caregivers "
    "receive 6 weeks. Leave must be requested from the People Team at least 8 weeks ahead.",
    "Expenses above EUR 5,000 need approval from the CFO, Rajiv Menon, before booking. "
    "Hotels in Toronto are reimbursed up to CAD 275 per night.",
]


@pytest.mark.timeout(900)
def test_local_model_enriches_chunks(tmp_path_factory: pytest.TempPathFactory) -> None:
    models_dir: Path = tmp_path_factory.getbasetemp() / "models"
    client = LLMClient("local", models_dir=models_dir, max_output_tokens=200, max_attempts=1)
    # 270M parameters: answers are often poor, so the contract is that whatever comes back is
    # schema-valid or a recorded failure, and that the grammar-constrained path does produce.
    # Passages are tried until one parses: each generation costs about 20 s on 2 cores, and
    # which passage the model gets right varies with what the process generated before.
    failures: list[str] = []
    parsed: ChunkEnrichment | None = None
    for text in PASSAGES:
        try:
            answer = client.complete(
                load_prompt(CHUNK_PROMPT),
                ChunkEnrichment,
                title="Fernhill policies",
                breadcrumb="Policies",
                text=text,
            )
        except LLMFailure as failure:  # the model is weak: a failure is data, not a crash
            failures.append(str(failure))
        else:
            parsed = answer.value
            break
    assert parsed is not None, failures
    assert all("attempt" in failure for failure in failures)
    assert 2 <= len(parsed.faqs) <= 4
    assert 3 <= len(parsed.keywords) <= 8
    assert all(question.strip() for question in parsed.faqs)
    # Every reply the model produced counts as a call, valid or not; a request that timed out
    # on a busy machine produced none.
    replies = [failure for failure in failures if "invalid output" in failure]
    assert client.usage.calls == len(replies) + 1
    assert client.usage.tokens_out > 0
    assert client.usage.cost_usd == 0.0
