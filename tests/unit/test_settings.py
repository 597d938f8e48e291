"""Settings users copy from `.env.example`, and the embedder's threads they can raise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lorehouse.embedding.minilm import default_embedder
from lorehouse.settings import Settings, get_settings

ENV_EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"
#: Example values that are paths or machine-dependent on purpose, not copies of a default.
EXAMPLE_ONLY = {"source_uri", "data_dir", "workers"}


def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in os.environ:
        if name.startswith("LOREHOUSE_"):
            monkeypatch.delenv(name)


def test_env_example_states_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copied `.env.example` must not quietly change behaviour: every value it sets is the
    default the settings hold (it once set the ANN threshold to 10,000 where the default was
    50,000, and the answer floor to 0.45 where it was 0.40)."""
    _clean_environment(monkeypatch)
    defaults = Settings(_env_file=None)
    lines = re.findall(r"^LOREHOUSE_([A-Z0-9_]+)=(.*)$", ENV_EXAMPLE.read_text(), re.MULTILINE)
    assert len(lines) > 20
    differing = []
    for name, value in lines:
        field = name.lower()
        assert field in Settings.model_fields, f".env.example sets unknown LOREHOUSE_{name}"
        if field in EXAMPLE_ONLY:
            continue
        monkeypatch.setenv(f"LOREHOUSE_{name}", value)
        if getattr(Settings(_env_file=None), field) != getattr(defaults, field):
            differing.append(f"LOREHOUSE_{name}={value} (default {getattr(defaults, field)})")
        monkeypatch.delenv(f"LOREHOUSE_{name}")
    assert not differing, f".env.example differs from the defaults: {differing}"


def test_env_example_names_every_setting() -> None:
    """The README promises `.env.example` documents each setting, set or commented out."""
    named = set(re.findall(r"^#? ?LOREHOUSE_([A-Z0-9_]+)=", ENV_EXAMPLE.read_text(), re.MULTILINE))
    missing = sorted(
        f"LOREHOUSE_{f.upper()}" for f in Settings.model_fields if f.upper() not in named
    )
    assert not missing, f".env.example does not mention {missing}"


def test_bundled_embedder_takes_its_threads_from_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run pod with more cores embeds on as many threads as `LOREHOUSE_EMBED_THREADS` says,
    and the vectors do not depend on it."""
    default_vector = default_embedder().embed(["How many vacation days do I get?"])[0]
    monkeypatch.setenv("LOREHOUSE_EMBED_THREADS", "1")
    get_settings.cache_clear()
    default_embedder.cache_clear()
    try:
        embedder = default_embedder()
        assert embedder._get_session().get_session_options().intra_op_num_threads == 1
        assert embedder._query_threads == 1
        one_thread = embedder.embed(["How many vacation days do I get?"])[0]
        assert float(one_thread @ default_vector) > 0.9999
    finally:
        get_settings.cache_clear()
        default_embedder.cache_clear()


def test_defaults_that_depend_on_the_machine_follow_the_cores_a_process_may_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A container pinned to 2 of 64 cores must start 2 parsers and take 2 search turns, not
    64: the affinity decides where the OS reports it, the machine's count elsewhere."""
    import os

    from lorehouse import settings as settings_module

    _clean_environment(monkeypatch)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 7}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert settings_module.available_cores() == 2
    pinned = Settings()
    assert (pinned.workers, pinned.api_search_threads) == (2, 2)
    # Two server processes on those 2 cores search one at a time each; more never go below 1.
    assert Settings(api_workers=2).api_search_threads == 1
    monkeypatch.setenv("LOREHOUSE_API_WORKERS", "3")
    assert Settings().api_search_threads == 1
    assert Settings(api_search_threads=4).api_search_threads == 4

    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert settings_module.available_cores() == 64
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert settings_module.available_cores() == 1
