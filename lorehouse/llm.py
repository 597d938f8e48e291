"""The one door to language models: litellm, versioned prompts, validated structured output.

Whatever the provider (OpenAI, Anthropic, Bedrock, Ollama, any OpenAI-compatible server), a
call is `litellm.completion` with the answer's JSON schema as `response_format` where the provider
supports it. Answers are parsed into pydantic models; invalid output is retried, rate limits
and timeouts back off exponentially, and a call that still fails raises `LLMFailure` for the
caller to record, never to crash a run. Usage (calls, tokens, cost) is counted here so every
stage reports it the same way.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from lorehouse.errors import validation_summary
from lorehouse.retry import backoff_seconds

T = TypeVar("T", bound=BaseModel)


@cache
def litellm_module() -> ModuleType:
    """litellm, imported on first use and configured once.

    Importing it costs seconds; most runs (extractive answers and enrichment, the bundled
    embedder) never call a provider, so the CLI, the server and every Dagster step process
    start without it.
    """
    import litellm

    # litellm prints a "Give Feedback / Get Help" banner to stdout on every provider error,
    # which would corrupt the CLI's --json output; the error itself is raised and logged.
    litellm.suppress_debug_info = True
    return litellm


def transient_errors() -> tuple[type[Exception], ...]:
    """Errors worth waiting for: the provider is busy or the network hiccuped."""
    litellm = litellm_module()
    return (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.ServiceUnavailableError,
        litellm.InternalServerError,
    )


def provider_error() -> type[Exception]:
    """The base of every provider error litellm raises (auth, bad request, unknown model...)."""
    import openai

    return openai.APIError


class LLMFailure(Exception):
    """A call that did not produce a valid answer after every attempt."""


@dataclass(frozen=True)
class Prompt:
    """A prompt template file; its name (e.g. `chunk_enrichment.v1`) is its version."""

    version: str
    template: str

    def render(self, **values: str) -> str:
        return self.template.format(**values)

    @property
    def fingerprint(self) -> str:
        """Name and content: what cached answers are keyed by.

        Keying by content as well as by name means an edited prompt (an override file, or a
        bundled one changed without a new version number) never reuses answers to the old one.
        """
        digest = hashlib.sha256(self.template.encode()).hexdigest()[:12]
        return f"{self.version}#{digest}"


def load_prompt(version: str, overrides_dir: Path | None = None) -> Prompt:
    """`<overrides_dir>/<version>.md` when that file exists, else the bundled prompt.

    Overrides let a deployment tune prompts to its documents without forking the package.
    """
    if overrides_dir is not None:
        override = overrides_dir / f"{version}.md"
        if override.is_file():
            return Prompt(version=version, template=override.read_text(encoding="utf-8"))
    return _bundled_prompt(version)


@cache
def _bundled_prompt(version: str) -> Prompt:
    text = files("lorehouse.prompts").joinpath(f"{version}.md").read_text(encoding="utf-8")
    return Prompt(version=version, template=text)


@dataclass
class LLMUsage:
    """What calls cost, accumulated across threads."""

    calls: int = 0
    failures: int = 0
    retries: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **amounts: float) -> None:
        with self._lock:
            for name, amount in amounts.items():
                setattr(self, name, getattr(self, name) + amount)


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A validated answer with the tokens and cost of the call that produced it."""

    value: T
    tokens_in: int
    tokens_out: int
    cost_usd: float


class LLMClient:
    """Structured completions from one configured model, with retries and usage accounting."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        max_attempts: int = 3,
        timeout_seconds: float = 60.0,
        max_output_tokens: int = 400,
        backoff_seconds: float = 1.0,
        prompts_dir: Path | None = None,
        call_options: dict[str, Any] | None = None,
    ) -> None:
        self._enforces_schema = _enforces_schema(model)
        self.model = model
        self.api_base = api_base
        self.max_attempts = max(1, max_attempts)
        self.timeout_seconds = timeout_seconds
        self.max_output_tokens = max_output_tokens
        self.backoff_seconds = backoff_seconds
        # Extra litellm arguments for every call (tests pass litellm's own `mock_response`).
        self.call_options = dict(call_options or {})
        self.usage = LLMUsage()
        self.prompts_dir = prompts_dir
        self._prompts: dict[str, Prompt] = {}

    def prompt(self, version: str) -> Prompt:
        """The prompt this client's deployment uses under `version` (override or bundled).

        Read once per client, so every call of one run uses the same text.
        """
        if version not in self._prompts:
            self._prompts[version] = load_prompt(version, self.prompts_dir)
        return self._prompts[version]

    def complete(self, prompt: Prompt, response_model: type[T], **values: str) -> Answer[T]:
        """One validated answer, or LLMFailure after `max_attempts` tries."""

        def parse(content: str) -> tuple[T | None, str | None]:
            try:
                return response_model.model_validate_json(_json_part(content)), None
            except ValidationError as error:
                return None, validation_summary(error, whole="json")

        response_format = response_model if self._enforces_schema else {"type": "json_object"}
        return self._complete(prompt.render(**values), parse, response_format=response_format)

    def complete_text(
        self, prompt: Prompt, check: Callable[[str], str | None], **values: str
    ) -> str:
        """Free text (an answer with citations) accepted by `check`, retried otherwise.

        `check` returns why a reply is unusable, or None; LLMFailure after `max_attempts`.
        """

        def parse(content: str) -> tuple[str | None, str | None]:
            problem = check(content)
            return (content, None) if problem is None else (None, problem)

        return self._complete(prompt.render(**values), parse).value

    def _complete(
        self,
        prompt_text: str,
        parse: Callable[[str], tuple[Any, str | None]],
        **options: Any,
    ) -> Answer[Any]:
        """The retry loop every non-streaming call shares.

        Transient provider errors back off and retry, other provider errors fail at once,
        and a reply `parse` rejects (it returns the reason) is asked for again.
        """
        messages = [{"role": "user", "content": prompt_text}]
        last_problem = "no attempt made"
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1:
                self.usage.add(retries=1)
            started = time.perf_counter()
            try:
                response = self._request(messages, **options)
            except transient_errors() as error:
                self.usage.add(seconds=time.perf_counter() - started)
                last_problem = f"{type(error).__name__}: {error}"
                if attempt < self.max_attempts:
                    time.sleep(backoff_seconds(attempt, self.backoff_seconds))
                continue
            # Auth, bad request, unknown model: retrying will not help. litellm's provider
            # errors all derive from openai's.
            except provider_error() as error:
                self.usage.add(failures=1, seconds=time.perf_counter() - started)
                raise LLMFailure(f"{type(error).__name__}: {error}") from error
            tokens_in, tokens_out = _token_usage(response)
            cost = _cost(response)
            self.usage.add(
                calls=1,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                cost_usd=cost,
                seconds=time.perf_counter() - started,
            )
            content = response.choices[0].message.content or ""
            value, problem = parse(content)
            if problem is None:
                return Answer(
                    value=value, tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=cost
                )
            # What was wrong, never the reply itself: a model that echoes its prompt would
            # put the prompt, passages and all, into an error a person reads.
            last_problem = f"invalid output: {problem}"
        self.usage.add(failures=1)
        raise LLMFailure(f"no valid answer after {self.max_attempts} attempts: {last_problem}")

    def stream_text(self, prompt: Prompt, **values: str) -> Iterator[str]:
        """Text pieces as the model produces them; LLMFailure if the stream cannot start.

        No retries: pieces already shown cannot be taken back, so the caller validates the
        whole reply and falls back if it is unusable.
        """
        messages = [{"role": "user", "content": prompt.render(**values)}]
        waited = 0.0
        try:
            started = time.perf_counter()
            stream = self._request(messages, stream=True, stream_options={"include_usage": True})
            waited += time.perf_counter() - started
            tokens_in = tokens_out = 0
            while True:
                started = time.perf_counter()
                chunk = next(stream, None)
                waited += time.perf_counter() - started
                if chunk is None:
                    break
                usage = getattr(chunk, "usage", None)
                if usage:
                    tokens_in = int(usage.prompt_tokens or 0)
                    tokens_out = int(usage.completion_tokens or 0)
                if chunk.choices and chunk.choices[0].delta.content:
                    yield chunk.choices[0].delta.content
        except provider_error() as error:
            self.usage.add(failures=1, seconds=waited)
            raise LLMFailure(f"{type(error).__name__}: {error}") from error
        self.usage.add(calls=1, tokens_in=tokens_in, tokens_out=tokens_out, seconds=waited)

    def _request(self, messages: list[dict[str, str]], **options: Any) -> Any:
        """One litellm completion call with this client's model, limits and extra options.

        The provider SDK's own retries are off (`max_retries=0`): this client's loop is the
        one retry layer, so `max_attempts` and the timeout bound a call's total wait instead
        of being multiplied by hidden retries underneath.
        """
        return litellm_module().completion(
            model=self.model,
            messages=messages,
            temperature=0.0,
            max_tokens=self.max_output_tokens,
            timeout=self.timeout_seconds,
            max_retries=0,
            api_base=self.api_base,
            **options,
            **self.call_options,
        )


def _enforces_schema(model: str) -> bool:
    """Whether to send the answer's JSON schema (else plain JSON mode), asked once per client."""
    try:
        return bool(litellm_module().supports_response_schema(model=model))
    except Exception:  # noqa: BLE001 - unknown model names raise; JSON mode is the safe side
        return False


def _token_usage(response: Any) -> tuple[int, int]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return 0, 0
    return int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)


def _cost(response: Any) -> float:
    """litellm's cost map (offline copy); models it does not price, like the local one, cost 0."""
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost")
    if cost is None:
        try:
            cost = litellm_module().completion_cost(completion_response=response)
        except Exception:  # noqa: BLE001 - litellm raises plain Exception for unpriced models
            cost = 0.0
    return float(cost or 0.0)


def _json_part(content: str) -> str:
    """The JSON object in a reply, tolerating code fences some models add in JSON mode."""
    start, end = content.find("{"), content.rfind("}")
    return content[start : end + 1] if 0 <= start < end else content


def as_json(value: BaseModel) -> str:
    """A model as compact JSON, for the cache table."""
    return json.dumps(value.model_dump(), ensure_ascii=False, separators=(",", ":"))
