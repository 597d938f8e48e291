"""A version change of one stage reprocesses that stage and what depends on it, no more.

Enrichment runs against an OpenAI-compatible chat endpoint on 127.0.0.1 (through litellm), so
LLM calls are real calls that can be counted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lorehouse.llm import load_prompt
from lorehouse.settings import BUNDLED_SAMPLE_CORPUS
from lorehouse.stores.duckdb_store import DuckDBStore
from tests.conftest import materialize_everything
from tests.dagster.conftest import metadata_of
from tests.provider_server import provider_server

DOCUMENTS = [
    "hr/parental-leave-faq.md",
    "engineering/oncall-runbook.md",
    # Only a table: no prose to enrich, so a new chunk prompt changes nothing of it.
    "security/vendor-risk-register.xlsx",
]


def _stage_counts(result: object) -> dict[str, object]:
    parsed = metadata_of(result, "parsed_documents")
    chunked = metadata_of(result, "chunks")
    enriched = metadata_of(result, "enriched_chunks")
    embedded = metadata_of(result, "chunk_embeddings")
    return {
        "parsed": parsed["parsed_this_run"],
        "chunked": chunked["documents_chunked"],
        "llm_calls": enriched["llm_calls"],
        "chunks_embedded": embedded["embedded"],
        "chunk_rows_written": embedded["rows_written"],
        "documents_embedded": embedded["documents_embedded"],
    }


def test_prompt_and_chunker_changes_redo_only_their_stage_and_what_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    source = tmp_path / "corpus"
    for name in DOCUMENTS:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(BUNDLED_SAMPLE_CORPUS / name, source / name)
    data_dir = tmp_path / "data"
    store = DuckDBStore(data_dir / "lorehouse.duckdb")

    with provider_server() as server:
        llm = {"llm_model": "openai/lorehouse-test-chat", "llm_api_base": server.base_url}
        first = _stage_counts(materialize_everything(source, data_dir, **llm, with_evals=False))
        chunks = store.row_count("chunks")
        tables = int(store.table("chunks")["is_table"].sum())
        assert 0 < tables < chunks
        # one call per chunk and one summary per document
        assert first["llm_calls"] == chunks + len(DOCUMENTS)
        assert first["chunks_embedded"] == chunks

        unchanged = _stage_counts(materialize_everything(source, data_dir, **llm, with_evals=False))
        assert unchanged == dict.fromkeys(unchanged, 0)

        # A new chunk prompt: prose chunks are enriched again, nothing is parsed or chunked.
        prompts = tmp_path / "prompts"
        prompts.mkdir()
        bundled = load_prompt("chunk_enrichment.v1").template
        (prompts / "chunk_enrichment.v1.md").write_text(
            bundled + "\nWrite questions the way a new employee would ask them.\n"
        )
        faqs_before = set(store.table("chunk_faqs")["question"])
        new_prompt = _stage_counts(
            materialize_everything(source, data_dir, prompts_dir=prompts, **llm, with_evals=False)
        )
        assert new_prompt["parsed"] == new_prompt["chunked"] == 0
        assert new_prompt["llm_calls"] == chunks - tables
        # New FAQs change what BM25 and the document profiles read; chunk vectors embed the
        # chunk's own text, which did not change, so none is embedded again.
        assert new_prompt["chunk_rows_written"] == chunks - tables
        assert new_prompt["chunks_embedded"] == 0
        # Document profiles carry FAQs; the spreadsheet has only tables, so no FAQs to change.
        frame = store.table("chunks")
        with_prose = frame.loc[~frame["is_table"].astype(bool), "doc_id"].nunique()
        assert new_prompt["documents_embedded"] == with_prose == len(DOCUMENTS) - 1
        assert set(store.table("chunk_faqs")["question"]).isdisjoint(faqs_before)

        # A new chunk size: everything from chunking on is redone, nothing is parsed.
        resized = _stage_counts(
            materialize_everything(
                source, data_dir, prompts_dir=prompts, chunk_max_tokens=96, **llm, with_evals=False
            )
        )
        assert resized["parsed"] == 0
        assert resized["chunked"] == len(DOCUMENTS)
        assert store.row_count("chunks") > chunks
        assert resized["chunks_embedded"] > 0
        assert resized["llm_calls"] > 0
