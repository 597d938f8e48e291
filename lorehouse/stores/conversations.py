"""Saved conversations: each caller's questions and the answers they got, kept on the server
so a reader goes on with yesterday's conversation from any browser.

A conversation belongs to the caller that started it (the API key's name) and to nobody else:
every read, rename and delete names its owner in the query itself, so an id that is guessed,
or leaked from someone else's screen, reads as absent. Ids are random 128-bit hex.

The store is SQLAlchemy over any database it reaches: by default a SQLite file in the data
folder (WAL, so the `--workers` processes of one host share it), or PostgreSQL, which the
pods of a cluster share. It is not the DuckDB feature store, which a reindex holds for writing
for as long as it runs: a reader's next question must not wait for that.

An answer is stored as the pipeline returned it. What the owner may read can change after,
so whoever shows a stored answer re-checks its chunks first (`api/routers/conversations.py`).
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

#: How often, at most, a write also deletes what the retention setting no longer keeps.
PURGE_EVERY = timedelta(hours=1)
TITLE_CHARS = 200
UNTITLED = "New conversation"

_metadata = sa.MetaData()
CONVERSATIONS = sa.Table(
    "lorehouse_conversations",
    _metadata,
    sa.Column("conversation_id", sa.String(32), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False, index=True),
    sa.Column("title", sa.String(TITLE_CHARS), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, index=True),
)
TURNS = sa.Table(
    "lorehouse_conversation_turns",
    _metadata,
    sa.Column(
        "conversation_id",
        sa.String(32),
        sa.ForeignKey(CONVERSATIONS.c.conversation_id, ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("question", sa.Text, nullable=False),
    #: The answer as the pipeline returned it (AskResponse JSON).
    sa.Column("answer", sa.Text, nullable=False),
    sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
)


@dataclass(frozen=True)
class ConversationRecord:
    conversation_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    turns: int


@dataclass(frozen=True)
class TurnRecord:
    position: int
    question: str
    answer: dict[str, Any]
    asked_at: datetime


class ConversationStore:
    """Conversations per owner in the database at `url` (a SQLAlchemy URL).

    `retention_days` (0: until deleted) is how long a conversation is kept after its last
    question; older ones are deleted, turns and all, on the next write after PURGE_EVERY.
    """

    def __init__(self, url: str, retention_days: int) -> None:
        self.retention_days = retention_days
        self._engine = _engine(url)
        _metadata.create_all(self._engine)
        self._purged_at: datetime | None = None
        self._purge_lock = threading.Lock()

    def dispose(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _begin(self) -> Iterator[Connection]:
        with self._engine.begin() as connection:
            yield connection

    # -- reads ----------------------------------------------------------------------------------

    def conversations(
        self, owner: str, limit: int, offset: int
    ) -> tuple[int, list[ConversationRecord]]:
        """(total, one page) of the owner's conversations kept, the latest first."""
        turns = (
            sa.select(sa.func.count())
            .where(TURNS.c.conversation_id == CONVERSATIONS.c.conversation_id)
            .scalar_subquery()
        )
        kept = sa.and_(CONVERSATIONS.c.owner == owner, self._kept())
        with self._begin() as connection:
            total = connection.execute(
                sa.select(sa.func.count()).select_from(CONVERSATIONS).where(kept)
            ).scalar_one()
            rows = connection.execute(
                sa.select(
                    CONVERSATIONS.c.conversation_id,
                    CONVERSATIONS.c.title,
                    CONVERSATIONS.c.created_at,
                    CONVERSATIONS.c.updated_at,
                    turns.label("turns"),
                )
                .where(kept)
                .order_by(CONVERSATIONS.c.updated_at.desc(), CONVERSATIONS.c.conversation_id.desc())
                .limit(limit)
                .offset(offset)
            ).all()
        return int(total), [_record(row) for row in rows]

    def conversation(
        self, owner: str, conversation_id: str
    ) -> tuple[ConversationRecord, list[TurnRecord]] | None:
        """The owner's conversation and its turns in order; None for anyone else's, or none."""
        with self._begin() as connection:
            found = self._owned(connection, owner, conversation_id)
            if found is None:
                return None
            rows = connection.execute(
                sa.select(TURNS)
                .where(TURNS.c.conversation_id == conversation_id)
                .order_by(TURNS.c.position)
            ).all()
        turns = [
            TurnRecord(row.position, row.question, json.loads(row.answer), _aware(row.asked_at))
            for row in rows
        ]
        return _record(found, len(turns)), turns

    # -- writes ---------------------------------------------------------------------------------

    def create(self, owner: str, title: str) -> ConversationRecord:
        now = datetime.now(UTC)
        record = ConversationRecord(secrets.token_hex(16), _title(title), now, now, 0)
        with self._begin() as connection:
            connection.execute(
                CONVERSATIONS.insert().values(
                    conversation_id=record.conversation_id,
                    owner=owner,
                    title=record.title,
                    created_at=now,
                    updated_at=now,
                )
            )
        self._purge_if_due()
        return record

    def rename(self, owner: str, conversation_id: str, title: str) -> bool:
        """Whether the owner had such a conversation (and it is renamed)."""
        with self._begin() as connection:
            done = connection.execute(
                CONVERSATIONS.update()
                .where(self._is(owner, conversation_id))
                .values(title=_title(title))
            )
        return done.rowcount == 1

    def delete(self, owner: str, conversation_id: str) -> bool:
        """Deletes the conversation and every turn of it; whether the owner had it."""
        with self._begin() as connection:
            if self._owned(connection, owner, conversation_id) is None:
                return False
            connection.execute(TURNS.delete().where(TURNS.c.conversation_id == conversation_id))
            connection.execute(CONVERSATIONS.delete().where(self._is(owner, conversation_id)))
        return True

    def add_turn(
        self, owner: str, conversation_id: str, question: str, answer: dict[str, Any]
    ) -> int | None:
        """Appends a question and its answer; the turn's position, or None when the owner has
        no such conversation (deleted meanwhile, or never theirs)."""
        now = datetime.now(UTC)
        with self._begin() as connection:
            found = self._owned(connection, owner, conversation_id, for_update=True)
            if found is None:
                return None
            # A conversation started without a title is named by its first question.
            untitled = found.title == UNTITLED
            position = connection.execute(
                sa.select(sa.func.coalesce(sa.func.max(TURNS.c.position) + 1, 0)).where(
                    TURNS.c.conversation_id == conversation_id
                )
            ).scalar_one()
            connection.execute(
                TURNS.insert().values(
                    conversation_id=conversation_id,
                    position=position,
                    question=question,
                    answer=json.dumps(answer, default=str),
                    asked_at=now,
                )
            )
            named = {"title": _title(question)} if position == 0 and untitled else {}
            connection.execute(
                CONVERSATIONS.update()
                .where(CONVERSATIONS.c.conversation_id == conversation_id)
                .values(updated_at=now, **named)
            )
        self._purge_if_due()
        return int(position)

    def purge(self, now: datetime | None = None) -> int:
        """Deletes every conversation older than the retention allows; how many."""
        if self.retention_days <= 0:
            return 0
        cutoff = (now or datetime.now(UTC)) - timedelta(days=self.retention_days)
        expired = sa.select(CONVERSATIONS.c.conversation_id).where(
            CONVERSATIONS.c.updated_at < cutoff
        )
        with self._begin() as connection:
            connection.execute(TURNS.delete().where(TURNS.c.conversation_id.in_(expired)))
            done = connection.execute(
                CONVERSATIONS.delete().where(CONVERSATIONS.c.updated_at < cutoff)
            )
        return int(done.rowcount)

    # -- helpers --------------------------------------------------------------------------------

    def _kept(self) -> sa.ColumnElement[bool]:
        """What retention still keeps: a conversation past it is never shown, even before
        the purge that deletes it has run."""
        if self.retention_days <= 0:
            return sa.true()
        cutoff = datetime.now(UTC) - timedelta(days=self.retention_days)
        return CONVERSATIONS.c.updated_at >= cutoff

    def _is(self, owner: str, conversation_id: str) -> sa.ColumnElement[bool]:
        return sa.and_(
            CONVERSATIONS.c.conversation_id == conversation_id,
            CONVERSATIONS.c.owner == owner,
            self._kept(),
        )

    def _owned(
        self, connection: Connection, owner: str, conversation_id: str, for_update: bool = False
    ) -> sa.Row | None:
        query = sa.select(CONVERSATIONS).where(self._is(owner, conversation_id))
        if for_update:
            query = query.with_for_update()
        return connection.execute(query).first()

    def _purge_if_due(self) -> None:
        now = datetime.now(UTC)
        with self._purge_lock:
            if self._purged_at is not None and now - self._purged_at < PURGE_EVERY:
                return
            self._purged_at = now
        self.purge(now)


def _engine(url: str) -> Engine:
    """An engine for `url`; SQLite files in WAL mode with a busy timeout, so several server
    processes on one host read while one writes, and a writer waits its turn instead of
    failing."""
    if not url.startswith("sqlite"):
        return sa.create_engine(url, pool_pre_ping=True)
    engine = sa.create_engine(url, connect_args={"timeout": 30})

    @sa.event.listens_for(engine, "connect")
    def _sqlite_pragmas(connection: Any, _: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


def _title(title: str) -> str:
    return " ".join(title.split())[:TITLE_CHARS] or UNTITLED


def _aware(moment: datetime) -> datetime:
    """SQLite hands timestamps back without their zone; they were written in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _record(row: Any, turns: int | None = None) -> ConversationRecord:
    return ConversationRecord(
        row.conversation_id,
        row.title,
        _aware(row.created_at),
        _aware(row.updated_at),
        int(row.turns if turns is None else turns),
    )
