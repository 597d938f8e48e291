"""A real server and a real browser for the page tests: the API on a free port of 127.0.0.1
over a private copy of the sample stores (and a second one asserting no lead), and Debian's
chromium driven by Playwright."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from lorehouse.api_keys import add_key
from lorehouse.settings import Settings
from tests.local_http import serve_app
from tests.provider_server import provider_server


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed; `make install` installs Debian's package")
    return found


@pytest.fixture(scope="module")
def stores(materialized_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(shutil.copytree(materialized_sample, tmp_path_factory.mktemp("chat") / "data"))


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    path = tmp_path_factory.mktemp("chat-keys") / "keys.yaml"
    return {
        "file": path,
        "reader": add_key(path, "reader", []),
        "security": add_key(path, "security-team", ["security"]),
        # Whose saved conversations the conversations test alone makes.
        "note-taker": add_key(path, "note-taker", []),
    }


@pytest.fixture(scope="module")
def server(stores: Path, keys: dict[str, object]) -> Iterator[str]:
    """`lorehouse serve`'s app on a free port, in a thread of this process."""
    yield from serve_app(Settings(data_dir=stores, api_keys_file=keys["file"]))


@pytest.fixture(scope="module")
def passages_server(
    materialized_sample: Path, tmp_path_factory: pytest.TempPathFactory, keys: dict[str, object]
) -> Iterator[str]:
    """A second server, over its own copy of the stores, that asserts no lead: every question
    the documents answer is answered with the closest passages."""
    stores = Path(
        shutil.copytree(materialized_sample, tmp_path_factory.mktemp("passages") / "data")
    )
    yield from serve_app(
        Settings(data_dir=stores, api_keys_file=keys["file"], answer_assert_threshold=1.0)
    )


#: What the model of `model_server` answers: a table, a list, code, a link, and markup that a
#: page must show as text, never run or build.
MODEL_ANSWER = """Parental leave by caregiver [1]:

| Caregiver | Weeks | Pay |
| --- | --- | --- |
| Primary | 20 | full |
| Secondary | 6 | full |

- Book it with the `People Team` at least **8 weeks** ahead.
- See [the FAQ](https://intranet.example/leave) and <img src=x onerror=alert(1)> too.

```
leave --request 20w
```
"""


def _model_reply(prompt: str) -> str:
    """A model that keeps the question, searches everything and answers MODEL_ANSWER."""
    if prompt.startswith("You rewrite"):
        question = prompt.split('New question:\n"""\n', 1)[1].split('\n"""', 1)[0]
        return json.dumps({"standalone": question, "sub_queries": [question]})
    if prompt.startswith("You choose"):
        return json.dumps({"documents": [], "all": True})
    return MODEL_ANSWER


@pytest.fixture(scope="module")
def model_server(stores: Path, keys: dict[str, object]) -> Iterator[str]:
    """A server whose answers a language model writes (the local OpenAI-compatible one of
    tests/provider_server.py), in Markdown."""
    with pytest.MonkeyPatch.context() as patch, provider_server() as model:
        patch.setenv("OPENAI_API_KEY", "local-test")
        model.chat_answer = _model_reply
        yield from serve_app(
            Settings(
                data_dir=stores,
                api_keys_file=keys["file"],
                llm_model="openai/gpt-4o-mini",
                llm_api_base=model.base_url,
                llm_max_attempts=1,
                conversations_url=f"sqlite:///{stores / 'model-conversations.sqlite3'}",
            )
        )


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=_chromium(), headless=True)
        yield launched
        launched.close()


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("LOREHOUSE_SCREENSHOT_DIR", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder
