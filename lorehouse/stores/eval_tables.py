"""The evaluation and feedback tables: eval results over time, and readers' verdicts."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

import pandas as pd

from lorehouse.stores.database import (
    Database,
    insert_frame,
)

#: Counting a caller's verdicts and storing the next one take turns within a process: its
#: threads share one DuckDB instance, where two transactions could both count one below the
#: quota and both insert. Other processes wait for the file's lock anyway.
_FEEDBACK_WRITES = threading.Lock()


@dataclass(frozen=True)
class FeedbackQuota:
    """At most `verdicts` from one caller within any `window`.

    Every verdict is a golden-set candidate that a person reviews, so one caller must not be
    able to queue more of them than reviewers can read.
    """

    verdicts: int
    window: timedelta


class EvalTables(Database):
    """What the eval assets and the feedback route write and read."""

    def append_eval_retrieval(self, frame: pd.DataFrame) -> None:
        """Adds one eval run's rows; runs are kept, so recall can be compared across runs."""
        with self._transaction(incoming=frame) as connection:
            insert_frame(connection, "eval_retrieval", "incoming", frame)

    def append_eval_retrieval_misses(self, frame: pd.DataFrame) -> None:
        """Adds why one eval run's misses were missed, one row per evidence excerpt."""
        with self._transaction(incoming=frame) as connection:
            insert_frame(connection, "eval_retrieval_misses", "incoming", frame)

    def add_feedback(
        self, row: dict[str, object], quota: FeedbackQuota | None = None
    ) -> datetime | None:
        """Stores one reader's verdict on an answer (see the answer_feedback table).

        With a `quota`, the verdict is stored only while its caller gave fewer than
        `quota.verdicts` in the `quota.window` before its `given_at`. Returns None when it was
        stored; else nothing is stored and the answer is when the caller's next verdict will
        be taken.
        """
        with _FEEDBACK_WRITES, self._transaction() as connection:
            if quota is not None:
                # The caller's quota-th latest verdict inside the window: while there is one,
                # the quota is used up, until that verdict leaves the window.
                used_up = connection.execute(
                    "SELECT given_at FROM answer_feedback WHERE caller = ? AND given_at > ? "
                    "ORDER BY given_at DESC LIMIT 1 OFFSET ?",
                    [
                        row["caller"],
                        cast(datetime, row["given_at"]) - quota.window,
                        quota.verdicts - 1,
                    ],
                ).fetchone()
                if used_up is not None:
                    return cast(datetime, used_up[0]) + quota.window
            connection.execute(
                "INSERT INTO answer_feedback (answer_id, given_at, caller, rating, comment, "
                "question, answer, cited_chunk_ids, cited_files) "
                "VALUES ($answer_id, $given_at, $caller, $rating, $comment, $question, $answer, "
                "$cited_chunk_ids, $cited_files)",
                row,
            )
        return None

    def feedback(self) -> pd.DataFrame:
        """Every verdict given, oldest first."""
        with self.connect() as connection:
            return connection.execute("SELECT * FROM answer_feedback ORDER BY given_at").df()

    def append_eval_answers(self, frame: pd.DataFrame) -> None:
        """Adds one answer-eval run's judged cases; runs are kept for comparison."""
        with self._transaction(incoming=frame) as connection:
            insert_frame(connection, "eval_answers", "incoming", frame)

    def recall_history(self, k: int, golden_set: str) -> list[tuple[str, str, float]]:
        """(run_id, retriever, recall@k) of the default retriever per run, newest first."""
        with self.connect() as connection:
            rows = connection.execute(
                "SELECT run_id, retriever, recall FROM eval_retrieval WHERE is_default "
                "AND k = ? AND case_type = 'all' AND golden_set = ? ORDER BY evaluated_at DESC",
                [k, golden_set],
            ).fetchall()
        return [(row[0], row[1], float(row[2])) for row in rows]
