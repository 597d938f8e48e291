"""Settings users copy from `.env.example`, and the embedder's threads they can raise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lorehouse.settings import GROUPS, REPO_ROOT, SETTING_GROUPS, Settings, get_settings
from lorehouse.settings_docs import generated_files, render_configuration_page, render_env_example
from tests.conftest import default_embedder


def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in os.environ:
        if name.startswith("LOREHOUSE_"):
            monkeypatch.delenv(name)


def test_the_configuration_page_and_env_example_are_generated_from_the_settings() -> None:
    """A setting is documented once, in `Settings`: the docs page and `.env.example` are
    rendered from it, so a changed default or description shows in both or this fails."""
    stale = [
        path.name
        for path, text in generated_files().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"run `python -m lorehouse.settings_docs`: {stale} are out of date"


def test_every_setting_is_declared_by_exactly_one_group() -> None:
    """A setting's group is the model that declares it: one declared on Settings itself would
    have no heading, and one declared by two groups would be merged without a word."""
    declared = [name for group in GROUPS for name in group.model_fields]
    assert sorted(declared) == sorted(Settings.model_fields)
    assert list(SETTING_GROUPS) == [group.heading for group in GROUPS]  # type: ignore[attr-defined]
    page = render_configuration_page()
    for name in Settings.model_fields:
        assert page.count(f"`LOREHOUSE_{name.upper()}`") == 1, name


def test_env_example_states_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copied `.env.example` with its lines uncommented must not quietly change behaviour:
    every value it shows reads back as the default the settings hold."""
    _clean_environment(monkeypatch)
    defaults = Settings(_env_file=None)
    lines = re.findall(r"^# LOREHOUSE_([A-Z0-9_]+)=(.+)$", render_env_example(), re.MULTILINE)
    assert len(lines) > 40
    differing = []
    for name, value in lines:
        field = name.lower()
        default = getattr(defaults, field)
        if isinstance(default, Path) or field == "source_uri":
            # paths inside the repository are shown relative to it, as `make demo` runs
            same = (REPO_ROOT / value).resolve() == Path(str(default)).resolve()
        else:
            monkeypatch.setenv(f"LOREHOUSE_{name}", value)
            same = getattr(Settings(_env_file=None), field) == default
            monkeypatch.delenv(f"LOREHOUSE_{name}")
        if not same:
            differing.append(f"LOREHOUSE_{name}={value} (default {default})")
    assert not differing, f".env.example differs from the defaults: {differing}"


def test_bundled_embedder_takes_its_threads_from_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run pod with more cores embeds on as many threads as `LOREHOUSE_EMBED_THREADS` says,
    and the vectors do not depend on it."""
    default_vector = default_embedder().embed(["How many vacation days do I get?"])[0]
    monkeypatch.setenv("LOREHOUSE_EMBED_THREADS", "1")
    get_settings.cache_clear()
    try:
        embedder = default_embedder()
        assert embedder._get_session().get_session_options().intra_op_num_threads == 1
        assert embedder._query_threads == 1
        one_thread = embedder.embed(["How many vacation days do I get?"])[0]
        assert float(one_thread @ default_vector) > 0.9999
    finally:
        get_settings.cache_clear()


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
