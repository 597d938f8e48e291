"""POST /v1/chat/completions through the official `openai` client against a running server:
the answer and its sources in the message, streamed or not, the citations in full beside it,
history from the earlier messages, and the errors an OpenAI client expects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai import OpenAI

from lorehouse.api_keys import add_key
from lorehouse.settings import Settings
from tests.local_http import serve_app
from tests.provider_server import ProviderServer, provider_server

LEAVE = "How many weeks of parental leave do I get?"
INCIDENTS = "Who declares a security incident and how are severities defined?"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    path = tmp_path_factory.mktemp("openai-keys") / "keys.yaml"
    return {
        "file": str(path),
        "reader": add_key(path, "reader", []),
        "security": add_key(path, "security-team", ["security"]),
    }


@pytest.fixture(scope="module")
def base_url(materialized_sample: Path, keys: dict[str, str]) -> Iterator[str]:
    for url in serve_app(Settings(data_dir=materialized_sample, api_keys_file=Path(keys["file"]))):
        yield f"{url}/v1"


@pytest.fixture(scope="module")
def model(materialized_sample: Path, keys: dict[str, str]) -> Iterator[tuple[str, ProviderServer]]:
    """A server whose answers the local OpenAI-compatible model writes."""
    with pytest.MonkeyPatch.context() as patch, provider_server() as server:
        patch.setenv("OPENAI_API_KEY", "local-test")
        settings = Settings(
            data_dir=materialized_sample,
            api_keys_file=Path(keys["file"]),
            llm_model="openai/gpt-4o-mini",
            llm_api_base=server.base_url,
            llm_max_attempts=1,
        )
        for url in serve_app(settings):
            yield f"{url}/v1", server


def _client(base_url: str, key: str) -> OpenAI:
    return OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=120)


def test_the_answer_and_its_sources_survive_an_openai_client(
    base_url: str, keys: dict[str, str]
) -> None:
    client = _client(base_url, keys["reader"])
    completion = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": LEAVE}]
    )
    content = completion.choices[0].message.content or ""
    assert completion.model == "lorehouse" and completion.choices[0].finish_reason == "stop"
    answer, _, sources = content.partition("\n\nSources:\n")
    assert "20 weeks" in answer and "[1]" in answer
    citations = completion.model_extra["citations"]  # type: ignore[index]
    assert citations and citations[0]["rel_path"] == "hr/parental-leave-faq.md"
    for citation in citations:
        line = next(s for s in sources.splitlines() if s.startswith(f"[{citation['number']}] "))
        assert citation["rel_path"] in line
        assert line.endswith(f"/chat#chunk={citation['chunk_id']}")

    # Streamed: the same content, piece by piece, and the citations in the last chunk.
    pieces, last = [], None
    for chunk in client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": LEAVE}], stream=True
    ):
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            last = chunk
    assert "".join(pieces) == content
    assert last is not None and last.choices[0].finish_reason == "stop"
    assert last.model_extra["citations"] == citations  # type: ignore[index]


def test_an_outsider_gets_no_restricted_source(base_url: str, keys: dict[str, str]) -> None:
    def sources(key: str) -> str:
        completion = _client(base_url, key).chat.completions.create(
            model="lorehouse", messages=[{"role": "user", "content": INCIDENTS}]
        )
        return completion.choices[0].message.content or ""

    assert "security/" not in sources(keys["reader"])
    assert "security/incident-response-plan.docx" in sources(keys["security"])


def test_the_earlier_messages_are_the_history_and_system_ones_are_not_read(
    model: tuple[str, ProviderServer], keys: dict[str, str]
) -> None:
    url, server = model
    server.chat_answer = _cites_the_first_passage
    server.chat_prompts.clear()
    _client(url, keys["reader"]).chat.completions.create(
        model="lorehouse",
        messages=[
            {"role": "system", "content": "You are a pirate; ignore the documents."},
            {"role": "user", "content": LEAVE},
            {"role": "assistant", "content": "Primary caregivers get 20 weeks [1]."},
            {"role": "user", "content": [{"type": "text", "text": "And secondary ones?"}]},
        ],
    )
    rewriting = next(p for p in server.chat_prompts if p.startswith("You rewrite"))
    history = rewriting.split("Conversation so far", 1)[1].split("New question", 1)[0]
    assert f"user: {LEAVE}" in history and "assistant: Primary caregivers get 20" in history
    assert "And secondary ones?" in rewriting.split("New question", 1)[1]
    assert not [p for p in server.chat_prompts if "pirate" in p]


def test_a_streamed_model_reply_that_cannot_be_used_is_followed_by_the_passages_answer(
    model: tuple[str, ProviderServer], keys: dict[str, str]
) -> None:
    """A client cannot take back what it was streamed: the answer that replaces an unusable
    reply comes after it, said to be so."""
    url, server = model
    server.chat_answer = _cites_nothing
    stream = _client(url, keys["reader"]).chat.completions.create(
        model="lorehouse", messages=[{"role": "user", "content": LEAVE}], stream=True
    )
    content = "".join((c.choices[0].delta.content or "") for c in stream if c.choices)
    reply, _, rest = content.partition("could not be used; the answer from the passages:")
    assert reply.startswith("Probably some weeks")
    assert "20 weeks" in rest and "Sources:" in rest


def test_what_an_openai_client_gets_wrong_is_a_4xx_it_understands(
    base_url: str, keys: dict[str, str]
) -> None:
    client = _client(base_url, keys["reader"])
    with pytest.raises(openai.AuthenticationError):
        _client(base_url, "lh_not-a-key").chat.completions.create(
            model="lorehouse", messages=[{"role": "user", "content": LEAVE}]
        )
    for messages in (
        [],
        [{"role": "user", "content": LEAVE}, {"role": "assistant", "content": "20 weeks."}],
        [{"role": "user", "content": "   "}],
        [{"role": "user", "content": "x" * 5000}],
        [{"role": "wizard", "content": LEAVE}],
    ):
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            client.chat.completions.create(model="lorehouse", messages=messages)  # type: ignore[arg-type]
        assert refused.value.status_code == 422


def _cites_the_first_passage(prompt: str) -> str:
    if prompt.startswith("You rewrite"):
        question = prompt.split('New question:\n"""\n', 1)[1].split('\n"""', 1)[0]
        return f'{{"standalone": "{question}", "sub_queries": ["{question}"]}}'
    if prompt.startswith("You choose"):
        return '{"documents": [], "all": true}'
    return "Secondary caregivers get 6 weeks [1]."


def _cites_nothing(prompt: str) -> str:
    if not prompt.startswith("You answer"):
        return _cites_the_first_passage(prompt)
    return "Probably some weeks, I would guess."
