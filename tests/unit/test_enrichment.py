"""Enrichment through litellm (mock_response): parsing, retries, recorded failures, the cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import litellm
import pytest

from lorehouse.chunking import Chunker
from lorehouse.embedding.minilm import default_token_counter
from lorehouse.enrichment import ChunkEnrichment, Enricher
from lorehouse.llm import LLMClient, LLMFailure, load_prompt
from lorehouse.parsing.runner import ParseLimits
from lorehouse.sources.local import LocalFolderSource
from lorehouse.stages.chunk import run_chunking
from lorehouse.stages.enrich import run_enrichment
from lorehouse.stages.features import run_document_features
from lorehouse.stages.inventory import run_inventory
from lorehouse.stages.parse import run_parse
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.conftest import BUNDLED_SAMPLE_CORPUS

CHUNK_ANSWER = {
    "faqs": ["How long is parental leave?", "Who approves parental leave?"],
    "keywords": ["parental leave", "20 weeks", "People Team"],
}
TABLE_ANSWER = {"summary": "Leave by office.\nToronto gives most.", "keywords": ["a", "b", "c"]}


@pytest.fixture
def chunked_store(tmp_path: Path) -> DuckDBStore:
    """Two sample documents, parsed and chunked: one prose FAQ and the on-call runbook."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(BUNDLED_SAMPLE_CORPUS / "hr" / "parental-leave-faq.md", corpus)
    shutil.copy(BUNDLED_SAMPLE_CORPUS / "engineering" / "oncall-runbook.md", corpus)
    store = DuckDBStore(tmp_path / "lorehouse.duckdb")
    source = LocalFolderSource(corpus)
    run_inventory(source, store, max_file_bytes=10_000_000)
    run_parse(source, store, ParseLimits(workers=1, timeout_seconds=60, max_file_bytes=10_000_000))
    run_chunking(store, Chunker(256, default_token_counter().count))
    return store


def _client(mock: object, **options: object) -> LLMClient:
    return LLMClient(
        "openai/gpt-4o-mini",
        backoff_seconds=0.01,
        call_options={"mock_response": mock},
        **options,  # type: ignore[arg-type]
    )


def _job_count(store: DuckDBStore) -> int:
    """One answer per chunk and one per document."""
    return store.row_count("chunks") + int(store.table("chunks")["doc_id"].nunique())


def test_answers_are_parsed_into_the_models(chunked_store: DuckDBStore) -> None:
    answer = json.dumps({**CHUNK_ANSWER, "summary": "A two line\nsummary of it.", "title": ""})
    client = _client(answer)
    report = run_enrichment(chunked_store, Enricher(client, concurrency=2))
    rows = chunked_store.table("enriched_chunks")
    assert report.mode == "llm"
    assert report.llm_calls == _job_count(chunked_store) == report.computed
    assert report.tokens_in > 0
    assert report.tokens_out > 0
    prose = rows[rows["summary"].isna()]
    assert set(rows["status"]) == {"enriched"}
    assert all(list(faqs) == CHUNK_ANSWER["faqs"] for faqs in prose["faqs"])
    assert all(list(k) == CHUNK_ANSWER["keywords"] for k in rows["keywords"])
    documents = chunked_store.table("document_enrichment")
    assert set(documents["summary"]) == {"A two line\nsummary of it."}


def test_invalid_json_is_retried_then_recorded_without_stopping_the_run(
    chunked_store: DuckDBStore,
) -> None:
    client = _client("Sure! Here are some keywords: leave, weeks", max_attempts=3)
    report = run_enrichment(chunked_store, Enricher(client, concurrency=2))
    jobs = _job_count(chunked_store)
    assert client.usage.calls == 3 * jobs
    assert client.usage.retries == 2 * jobs
    assert len(report.failures) == jobs
    rows = chunked_store.table("enriched_chunks")
    assert len(rows) == chunked_store.row_count("chunks")
    assert set(rows["status"]) == {"failed"}
    assert all("invalid output" in error for error in rows["error"])
    assert all(len(k) == 0 for k in rows["keywords"])


def test_a_partly_failing_run_keeps_what_succeeded(chunked_store: DuckDBStore) -> None:
    # A chunk answer is not a valid document summary: documents fail, chunks succeed.
    report = run_enrichment(chunked_store, Enricher(_client(json.dumps(CHUNK_ANSWER))))
    documents = chunked_store.table("document_enrichment")
    chunks = chunked_store.table("enriched_chunks")
    assert set(documents["status"]) == {"failed"}
    prose = chunks[chunks["summary"].isna() & chunks["status"].eq("enriched")]
    assert len(prose) > 0
    assert len(report.failures) == len(documents) + int((chunks["status"] == "failed").sum())
    counts = run_document_features(chunked_store)
    assert counts["documents"] == 2
    assert counts["chunk_faqs"] > 0


def test_second_run_on_unchanged_chunks_makes_no_calls(chunked_store: DuckDBStore) -> None:
    answer = json.dumps({**CHUNK_ANSWER, **TABLE_ANSWER, "summary": "Summary of the document."})
    first = run_enrichment(chunked_store, Enricher(_client(answer)))
    assert first.llm_calls > 0
    second_client = _client(answer)
    before = chunked_store.table("enriched_chunks")
    second = run_enrichment(chunked_store, Enricher(second_client))
    assert second_client.usage.calls == 0
    assert second.computed == 0
    # Nothing changed: no document is read again, no row rewritten.
    assert second.documents_up_to_date == first.documents
    assert second.documents == second.chunks == second.cache_hits == 0
    assert chunked_store.table("enriched_chunks").equals(before)
    assert before["status"].eq("enriched").all()


def test_only_documents_whose_chunks_changed_are_enriched_again(
    chunked_store: DuckDBStore,
) -> None:
    answer = json.dumps({**CHUNK_ANSWER, **TABLE_ANSWER, "summary": "Summary of the document."})
    first = run_enrichment(chunked_store, Enricher(_client(answer)))
    assert first.documents == 2
    changed = chunked_store.table("chunks").iloc[0]
    chunked_store.execute_in_transaction(
        [
            "UPDATE chunks SET text_chat = text_chat || ' Amended.', "
            f"chunk_id = 'amended-{changed['chunk_id']}' WHERE chunk_id = '{changed['chunk_id']}'"
        ]
    )
    client = _client(answer)
    second = run_enrichment(chunked_store, Enricher(client))
    assert (second.documents, second.documents_up_to_date) == (1, 1)
    assert client.usage.calls == 2  # the amended chunk and its document; the rest is cached
    enriched = chunked_store.table("enriched_chunks")
    assert f"amended-{changed['chunk_id']}" in set(enriched["chunk_id"])
    assert changed["chunk_id"] not in set(enriched["chunk_id"])


def test_a_failed_enrichment_is_tried_again_on_the_next_run(chunked_store: DuckDBStore) -> None:
    # A chunk answer is not a valid document summary: the documents fail.
    failing = run_enrichment(chunked_store, Enricher(_client(json.dumps(CHUNK_ANSWER))))
    assert failing.failures
    answer = json.dumps({**CHUNK_ANSWER, **TABLE_ANSWER, "summary": "Summary of the document."})
    retried = run_enrichment(chunked_store, Enricher(_client(answer)))
    assert retried.documents == 2 and retried.documents_up_to_date == 0
    assert not retried.failures
    assert set(chunked_store.table("document_enrichment")["status"]) == {"enriched"}


def test_rate_limits_back_off_and_then_fail_cleanly() -> None:
    error = litellm.RateLimitError("slow down", llm_provider="openai", model="gpt-4o-mini")
    client = _client(error, max_attempts=2)
    with pytest.raises(LLMFailure, match="RateLimitError"):
        client.complete(
            load_prompt("chunk_enrichment.v1"),
            ChunkEnrichment,
            title="t",
            breadcrumb="b",
            text="x",
        )
    assert client.usage.retries == 1


def test_extractive_mode_is_honest(chunked_store: DuckDBStore) -> None:
    report = run_enrichment(chunked_store, Enricher(None))
    rows = chunked_store.table("enriched_chunks")
    assert report.mode == "extractive"
    assert report.llm_calls == 0
    assert set(rows["enrichment_mode"]) == {"extractive"}
    assert all(len(faqs) == 0 for faqs in rows["faqs"])
    assert all(1 <= len(k) <= 8 for k in rows["keywords"])
    documents = chunked_store.table("document_enrichment")
    faq = documents[documents["summary"].str.contains("parental", case=False)]
    assert len(faq) == 1


def test_a_chunk_without_headings_gets_keywords_from_its_first_line() -> None:
    """Extractive keywords skip the breadcrumb line only where there is one: a chunk of a
    document without headings starts with its own words."""
    from lorehouse.enrichment import ChunkInput

    text = (
        "The Fortress Credit Agreement requires a Total Net Leverage Ratio of 8.00x, "
        "and the Company was in compliance with the Total Net Leverage Ratio.\n"
    )
    headless = ChunkInput("c1", "d1", "", text, text, is_table=False)
    keywords = Enricher(None)._extract_keywords(headless)
    assert any("Fortress Credit Agreement" in k for k in keywords)
    titled = ChunkInput("c2", "d1", "Loans", text, f"Loans\n{text}", is_table=False)
    assert Enricher(None)._extract_keywords(titled) == keywords


@pytest.mark.parametrize(
    ("breadcrumb", "text", "expected"),
    [
        ("", "42", ["42"]),
        ("Sheet1", "Sheet1\na\nb", ["a", "b"]),
        ("Lists", "Lists\n- & < > \" '", ["Lists"]),
    ],
)
def test_a_chunk_too_short_for_keyword_extraction_keeps_its_own_words(
    breadcrumb: str, text: str, expected: list[str]
) -> None:
    """Every enriched chunk has keywords (the enriched_chunks contract): a page number, a
    cell or a row of symbols gives its own words, else its heading's."""
    from lorehouse.enrichment import ChunkInput

    chunk = ChunkInput("c1", "d1", breadcrumb, text, text, is_table=False)
    assert Enricher(None)._extract_keywords(chunk) == expected


def test_the_extractive_summary_takes_the_central_sentences_in_reading_order() -> None:
    """TextRank over the sentences' words: the three sentences that share the most with the
    rest are the summary, in the order the document has them."""
    from lorehouse.enrichment import ChunkInput, DocumentInput, _extractive_summary

    lines = [
        "Parental leave is sixteen weeks of paid leave for every new parent.",
        "The office kitchen is cleaned every Friday afternoon by the facilities team.",
        "Paid parental leave starts on the day your child is born or adopted.",
        "Our team photo was taken at the offsite in the mountains last spring.",
        "Tell your manager about your parental leave eight weeks before it starts.",
    ]
    text = "Parental leave\n" + "\n".join(lines)
    chunk = ChunkInput("c1", "d1", "Parental leave", text, text, is_table=False)
    summary = _extractive_summary(DocumentInput("d1", "leave.md", "Leave", [chunk])).summary
    assert summary == " ".join([lines[0], lines[2], lines[4]])


def test_the_extractive_summary_runs_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A summary costs no pass of the embedding model, which the build spends on chunks."""
    import lorehouse.embedding.minilm as minilm
    from lorehouse.enrichment import ChunkInput, DocumentInput, _extractive_summary

    def refuse() -> None:
        raise AssertionError("the summary loaded the embedding model")

    monkeypatch.setattr(minilm, "shared_embedder", refuse)
    text = "Travel\n" + " ".join(f"Rule {n} of the travel policy covers hotels." for n in range(9))
    chunk = ChunkInput("c1", "d1", "Travel", text, text, is_table=False)
    only_stop_words = ChunkInput("c2", "d1", "", "it is what it was and\n" * 5, "", False)
    assert _extractive_summary(DocumentInput("d1", "t.md", "T", [chunk])).summary
    assert _extractive_summary(DocumentInput("d2", "s.md", "S", [only_stop_words]))
