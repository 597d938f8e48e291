"""The trace every answer carries: what each step did, how long it took, what it cost."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from pydantic import BaseModel, Field, PrivateAttr

from lorehouse.llm import LLMUsage

StepStatus = Literal["ok", "skipped", "fallback", "failed"]


class StepTrace(BaseModel):
    """One pipeline step. `skipped` means it needs an LLM and none is configured."""

    step: str
    status: StepStatus = "ok"
    ms: float = 0.0
    detail: str = ""
    llm_calls: int = 0
    llm_ms: float = Field(default=0.0, description="Time spent waiting for the model.")
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


class AskTrace(BaseModel):
    """Everything that led to an answer, for debugging and for evaluation."""

    original_query: str
    optimized_queries: list[str] = Field(default_factory=list)
    sources: list[str] | Literal["all"] = "all"
    sources_required: bool = Field(
        default=False,
        description=(
            "Whether retrieval was restricted to `sources` (an LLM's choice or a doc_ids filter)."
        ),
    )
    retrieved: dict[str, list[str]] = Field(
        default_factory=dict, description="Chunk ids retrieved for each (sub-)query."
    )
    context_chunk_ids: list[str] = Field(default_factory=list)
    steps: list[StepTrace] = Field(default_factory=list)
    #: Called with each step as it is recorded (a stream shows the steps as they finish).
    _on_step: Callable[[StepTrace], None] | None = PrivateAttr(default=None)

    def record(self, step: StepTrace) -> None:
        """Adds a finished step and tells the listener, if there is one."""
        self.steps.append(step)
        if self._on_step is not None:
            self._on_step(step)

    @property
    def llm_calls(self) -> int:
        return sum(step.llm_calls for step in self.steps)

    def totals(self) -> dict[str, float]:
        """Summed timings, tokens and cost, for the response and for benchmarks."""
        return {
            "ms": round(sum(s.ms for s in self.steps), 2),
            "llm_ms": round(sum(s.llm_ms for s in self.steps), 2),
            "llm_calls": self.llm_calls,
            "tokens_in": sum(s.tokens_in for s in self.steps),
            "tokens_out": sum(s.tokens_out for s in self.steps),
            "cost_usd": round(sum(s.cost_usd for s in self.steps), 6),
        }


@contextmanager
def timed_step(trace: AskTrace, name: str, usage: LLMUsage | None = None) -> Iterator[StepTrace]:
    """Records a step's wall time and the LLM usage it added, even when it raises."""
    step = StepTrace(step=name)
    before = _snapshot(usage)
    started = time.perf_counter()
    try:
        yield step
    finally:
        step.ms = round(1000 * (time.perf_counter() - started), 2)
        after = _snapshot(usage)
        step.llm_calls += after[0] - before[0]
        step.tokens_in += after[1] - before[1]
        step.tokens_out += after[2] - before[2]
        step.cost_usd = round(step.cost_usd + after[3] - before[3], 6)
        step.llm_ms = round(step.llm_ms + 1000 * (after[4] - before[4]), 2)
        trace.record(step)


def _snapshot(usage: LLMUsage | None) -> tuple[int, int, int, float, float]:
    if usage is None:
        return 0, 0, 0, 0.0, 0.0
    return usage.calls, usage.tokens_in, usage.tokens_out, usage.cost_usd, usage.seconds
