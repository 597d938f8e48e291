"""The bundled Gemma GGUF answers through litellm.completion like a hosted provider would."""

from __future__ import annotations

import asyncio
from pathlib import Path

import litellm
import pytest
from litellm.llms.custom_llm import CustomLLMError
from pydantic import BaseModel, Field

from lorehouse.llm import LLMClient, LLMFailure, Prompt
from lorehouse.local_llm import (
    GGUF_FILENAME,
    MODEL,
    PROVIDER,
    LocalGemmaLLM,
    register_local_provider,
    to_gemma_messages,
    to_llama_response_format,
)

PASSAGE = (
    "The Eiffel Tower in Paris was completed in 1889 for the World's Fair. "
    "It is built from wrought iron and was the tallest structure in the world for 41 years."
)


class Keywords(BaseModel):
    # Bounded so that the grammar-constrained answer always closes within max_tokens.
    keywords: list[str] = Field(min_length=1, max_length=3)


class Verdict(BaseModel):
    answer: bool


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


def _entries() -> list[dict]:
    return [item for item in litellm.custom_provider_map if item["provider"] == PROVIDER]


@pytest.mark.timeout(300)
def test_completion_returns_schema_valid_json_and_usage(models_dir: Path) -> None:
    model = register_local_provider(models_dir)
    assert model == MODEL

    response = litellm.completion(
        model=model,
        messages=[
            {"role": "system", "content": "You extract keywords and answer in JSON."},
            {"role": "user", "content": f"List the keywords of this passage.\n\n{PASSAGE}"},
        ],
        response_format=Keywords,
        temperature=0.0,
        max_tokens=96,
    )

    content = response.choices[0].message.content
    parsed = Keywords.model_validate_json(content)
    assert parsed.keywords
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0
    assert response.usage.total_tokens == (
        response.usage.prompt_tokens + response.usage.completion_tokens
    )


@pytest.mark.timeout(300)
def test_acompletion_works_through_the_same_handler(models_dir: Path) -> None:
    model = register_local_provider(models_dir)

    response = asyncio.run(
        litellm.acompletion(
            model=model,
            messages=[{"role": "user", "content": "Is Paris in France? Answer in JSON."}],
            response_format=Verdict,
            temperature=0.0,
            max_tokens=16,
        )
    )

    Verdict.model_validate_json(response.choices[0].message.content)
    assert response.usage.completion_tokens > 0


@pytest.mark.timeout(300)
def test_registering_twice_keeps_one_entry_and_one_complete_file(models_dir: Path) -> None:
    register_local_provider(models_dir)
    first = _entries()
    register_local_provider(models_dir)
    second = _entries()

    assert len(second) == 1
    assert isinstance(second[0]["custom_handler"], LocalGemmaLLM)
    assert second[0]["custom_handler"] is first[0]["custom_handler"]
    assert sorted(path.name for path in models_dir.iterdir()) == [GGUF_FILENAME]


@pytest.mark.timeout(300)
def test_a_call_past_its_timeout_fails_as_a_timeout_and_the_model_stays_usable(
    models_dir: Path,
) -> None:
    client = LLMClient(
        "local", models_dir=models_dir, max_attempts=1, timeout_seconds=0.05, max_output_tokens=400
    )
    long_question = f"Summarise this passage in detail, sentence by sentence.\n\n{PASSAGE * 6}"
    prompt = Prompt("timeout-check", "{question}")

    with pytest.raises(LLMFailure, match=r"Timeout.*timeout"):
        client.complete_text(prompt, lambda reply: None, question=long_question)

    client.timeout_seconds = 300
    reply = client.complete_text(prompt, lambda reply: None, question="Is Paris in France?")
    assert reply.strip()


@pytest.mark.timeout(300)
def test_the_thread_setting_reaches_the_loaded_model(models_dir: Path) -> None:
    register_local_provider(models_dir, n_threads=1)
    (handler,) = [item["custom_handler"] for item in _entries()]
    litellm.completion(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert handler.n_threads == 1
    assert handler._loaded().n_threads == 1

    register_local_provider(models_dir, n_threads=2)
    assert handler.n_threads == 2
    assert handler._loaded().n_threads == 2
    register_local_provider(models_dir)  # back to the default for the tests that follow


SCHEMA = Keywords.model_json_schema()


@pytest.mark.parametrize(
    "response_format",
    [
        Keywords,
        {"type": "json_schema", "json_schema": {"name": "Keywords", "schema": SCHEMA}},
        {"type": "json_object", "schema": SCHEMA},
    ],
    ids=["pydantic-class", "json_schema", "json_object"],
)
def test_response_format_becomes_a_schema_constrained_json_object(response_format: object) -> None:
    assert to_llama_response_format(response_format) == {"type": "json_object", "schema": SCHEMA}


def test_unenforceable_schema_is_refused_instead_of_loosened() -> None:
    bad = {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}
    with pytest.raises(CustomLLMError):
        to_llama_response_format({"type": "json_object", "schema": bad})


def test_system_prompt_is_folded_into_the_first_user_turn() -> None:
    turns = to_gemma_messages(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        ]
    )
    assert turns == [{"role": "user", "content": "Be brief.\n\nHi"}]
