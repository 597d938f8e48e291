"""Lorehouse configuration: one Settings object read from LOREHOUSE_* variables and `.env`.

Only the composition root (`lorehouse.wiring`) reads it, and hands every other module its
values, so a deployment is described in one place and a Settings built in code is obeyed as
one read from the environment.

`Settings` is composed of one model per concern (`SourceSettings`, `SearchSettings`, ...),
each in its own module of this package with its defaults and validators; a setting's group,
the heading the configuration page and `.env.example` list it under, is the model that
declares it. The variables stay flat (`LOREHOUSE_SEARCH_CANDIDATES`), as deployments set them.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from datetime import timedelta
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel
from pydantic_settings import BaseSettings, SettingsConfigDict

from lorehouse.settings.api import APISettings
from lorehouse.settings.ask import (
    DEFAULT_ANSWER_ASSERT_THRESHOLD,
    DEFAULT_ANSWER_MAX_WORDS,
    DEFAULT_ANSWER_MIN_SIMILARITY,
    DEFAULT_ANSWER_PASSAGES_MIN_SIMILARITY,
    AskSettings,
)
from lorehouse.settings.embedding import (
    DEFAULT_EMBED_QUERY_CACHE_BYTES,
    STEMMED_LANGUAGES,
    EmbeddingSettings,
)
from lorehouse.settings.evaluation import EvaluationSettings
from lorehouse.settings.llm import LLMSettings
from lorehouse.settings.machine import (
    BUNDLED_SAMPLE_CORPUS,
    PROJECT_DATA_DIR,
    REPO_ROOT,
    available_cores,
    default_data_dir,
    search_turns_default,
)
from lorehouse.settings.orchestration import OrchestrationSettings
from lorehouse.settings.parse import ParseSettings
from lorehouse.settings.search import (
    DEFAULT_ANN_INDEX_MIN_ROWS,
    DEFAULT_SEARCH_ANN_PROBES,
    DEFAULT_SEARCH_WARM_MIN_ROWS,
    SearchSettings,
)
from lorehouse.settings.sources import SourceSettings, source_sync_minutes

__all__ = [
    "BUNDLED_SAMPLE_CORPUS",
    "DEFAULT_ANN_INDEX_MIN_ROWS",
    "DEFAULT_ANSWER_ASSERT_THRESHOLD",
    "DEFAULT_ANSWER_MAX_WORDS",
    "DEFAULT_ANSWER_MIN_SIMILARITY",
    "DEFAULT_ANSWER_PASSAGES_MIN_SIMILARITY",
    "DEFAULT_EMBED_QUERY_CACHE_BYTES",
    "DEFAULT_SEARCH_ANN_PROBES",
    "DEFAULT_SEARCH_WARM_MIN_ROWS",
    "GROUPS",
    "NOT_SETTINGS",
    "PROJECT_DATA_DIR",
    "REPO_ROOT",
    "SETTING_GROUPS",
    "STEMMED_LANGUAGES",
    "Settings",
    "available_cores",
    "default_data_dir",
    "get_settings",
    "search_turns_default",
    "source_sync_minutes",
    "unknown_variables",
]


class Settings(
    SourceSettings,
    ParseSettings,
    LLMSettings,
    EmbeddingSettings,
    SearchSettings,
    AskSettings,
    APISettings,
    OrchestrationSettings,
    EvaluationSettings,
    BaseSettings,
):
    """Everything a Lorehouse deployment can change, with defaults that run offline.

    Its bases are the groups, in the order the configuration page lists them. What follows
    combines settings of several groups; each group's own settings and checks
    are in its module.
    """

    model_config = SettingsConfigDict(
        env_prefix="LOREHOUSE_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    def sync_interval(self, name: str | None) -> timedelta | None:
        """How long after its last sync the source `name` (None: a lone source) is due again;
        None: at every inventory."""
        minutes = source_sync_minutes(self.source_sync_minutes)
        found = minutes.get(name) if name else None
        if found is None:
            found = minutes.get("*")
        return timedelta(minutes=found) if found else None

    @property
    def lancedb_location(self) -> str:
        """The LanceDB database holding the `chunks` table and its indexes."""
        return self.lancedb_uri or str((self.data_dir / "lancedb").resolve())

    @property
    def snapshot_folder(self) -> Path | None:
        """Where the host's processes share searched table snapshots; None when each holds
        its own (`search_shared_snapshot`)."""
        return self.data_dir / "cache" / "snapshots" if self.search_shared_snapshot else None

    @property
    def chat_url(self) -> str:
        """The chat page's address, as links in Slack answers point at it."""
        base = self.public_url or f"http://{self.api_host}:{self.api_port}"
        return base.rstrip("/") + "/chat"

    @property
    def duckdb_path(self) -> Path:
        """The feature-store database every stage reads and writes."""
        return self.data_dir / "lorehouse.duckdb"

    @property
    def conversations_database(self) -> str:
        """The SQLAlchemy URL of the saved conversations' database."""
        return self.conversations_url or f"sqlite:///{self.data_dir / 'conversations.sqlite3'}"


#: The settings' groups, in the order the configuration page lists them: Settings' bases.
GROUPS: tuple[type[BaseModel], ...] = tuple(
    base for base in Settings.__bases__ if issubclass(base, BaseModel) and base is not BaseSettings
)

#: Each group's heading -> its settings, in the order its model declares them: what the
#: configuration page and `.env.example` are generated from (`python -m lorehouse.settings_docs`).
SETTING_GROUPS: dict[str, tuple[str, ...]] = {
    group.heading: tuple(group.model_fields)  # type: ignore[attr-defined]
    for group in GROUPS
}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once; tests build their own `Settings(...)` instead."""
    return Settings()


#: LOREHOUSE_* names that are no setting and are read by name where they are used: the test
#: suite's own variables (LOREHOUSE_TEST_*) and the chat page test's screenshot folder.
NOT_SETTINGS = ("LOREHOUSE_TEST_", "LOREHOUSE_SCREENSHOT_DIR")


def unknown_variables(
    environ: Mapping[str, str], env_file: Path | None = None
) -> list[tuple[str, str | None]]:
    """Each LOREHOUSE_* variable of `environ` and of `env_file` (a `.env`) that names no
    setting, with the setting's variable closest to it (None when none is close).

    Settings pass over a name they do not know, so a misspelt variable would leave its
    setting at the default without a word: LOREHOUSE_SOURCE_URL would index the bundled
    sample corpus instead of the folder meant.
    """
    names = list(environ)
    if env_file is not None and env_file.is_file():
        from dotenv import dotenv_values

        names += [name for name in dotenv_values(env_file) if name not in environ]
    known = {name.upper(): f"LOREHOUSE_{name.upper()}" for name in Settings.model_fields}
    unknown = []
    for name in names:
        # Variables are read whatever their case, as the settings read them.
        upper = name.upper()
        if not upper.startswith("LOREHOUSE_") or upper.startswith(NOT_SETTINGS):
            continue
        field = upper.removeprefix("LOREHOUSE_")
        if field not in known:
            # Compared without the prefix every name shares, which would make any two close;
            # a typo is closer than 0.7, and a guess below it would mislead.
            closest = difflib.get_close_matches(field, known, n=1, cutoff=0.7)
            unknown.append((name, known[closest[0]] if closest else None))
    return unknown
