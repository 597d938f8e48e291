"""Settings: API.

The HTTP server and what it serves beside the routes: keys, limits, Slack, saved
conversations, uploads and MCP.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field, field_validator

from lorehouse.settings.machine import (
    search_turns_default,
)


class APISettings(BaseModel):
    """The HTTP server's settings, with what it serves beside the routes."""

    #: The heading the configuration page lists these settings under.
    heading: ClassVar[str] = "API"

    api_host: str = Field(default="127.0.0.1", description="Where `lorehouse serve` listens.")
    api_port: int = Field(default=8000, ge=1, le=65535, description="Port of `lorehouse serve`.")
    public_url: str | None = Field(
        default=None,
        description="Address people reach the chat page at, for links in Slack answers; "
        "unset: http://API_HOST:API_PORT.",
    )
    api_keys_file: Path | None = Field(
        default=None,
        description="YAML file of hashed API keys and their groups; set means keys are required.",
    )
    api_workers: int = Field(
        default=1,
        ge=1,
        le=256,
        description=(
            "Server processes of `lorehouse serve` (its `--workers` option overrides it and "
            "tells the processes it starts)."
        ),
    )
    api_search_threads: int = Field(
        default_factory=lambda data: search_turns_default(data["api_workers"]),
        ge=1,
        le=256,
        description=(
            "Searches (`/v1/search`) computed at once per server process; default: the CPU "
            "cores this process may use, shared among the `api_workers` processes (at least "
            "1). A search is CPU work, so more at once only makes them take turns on the "
            "cores and spend more CPU each. Further searches wait on the event loop, holding "
            "no thread."
        ),
    )
    api_blas_threads: int = Field(
        default=1,
        ge=1,
        le=64,
        description=(
            "BLAS threads per numpy call in a server process. Requests already run on many "
            "threads; BLAS threads of their own spin against each other and cut the requests "
            "served by several times."
        ),
    )
    api_max_concurrent_asks: int = Field(
        default=4,
        ge=1,
        le=256,
        description=(
            "Answers computed at once per server process; each holds tens of MB while it runs, "
            "so this bounds memory. Further asks wait their turn."
        ),
    )
    api_ask_wait_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How long an ask waits for its turn before a 503 with Retry-After.",
    )
    api_max_body_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=64 * 1024,
        description=(
            "The largest request body the API reads, in bytes; a larger one is a 413, "
            "refused from its Content-Length before any of it is read, or as soon as a body "
            "sent without one passes the limit. The largest valid request (an ask with 20 "
            "turns of history and 1,000 document ids) is under 2.6 MB even with every "
            "character escaped, and parsing JSON takes several times a body's size."
        ),
    )
    api_keep_alive_seconds: int = Field(
        default=75,
        ge=1,
        description=(
            "How long `lorehouse serve` keeps an idle connection open. Longer than clients' "
            "own idle timeouts (httpx and most load balancers: 5-60 s), so the server is "
            "never the side closing a connection a client is about to reuse."
        ),
    )
    api_stream_ping_seconds: float = Field(
        default=15.0,
        gt=0,
        description=(
            "Seconds of silence after which a streamed answer sends a keep-alive comment, so "
            "proxies and load balancers (idle timeouts of 30-60 s) do not cut an answer whose "
            "model is still thinking."
        ),
    )
    api_feedback_per_key: int = Field(
        default=20,
        ge=1,
        le=100_000,
        description=(
            "Verdicts (POST /v1/feedback) one API key may send per "
            "api_feedback_window_seconds; further ones get a 429 with Retry-After. Each "
            "verdict is a golden-set candidate a person reviews, so one key must not be able "
            "to fill the review queue. Without a keys file every caller is the one "
            "anonymous caller and shares this allowance."
        ),
    )
    api_feedback_window_seconds: int = Field(
        default=3600,
        ge=1,
        le=366 * 24 * 3600,
        description="The sliding window api_feedback_per_key counts a key's verdicts in.",
    )
    slack_bot_token: str | None = Field(
        default=None,
        description="Bot token (xoxb-...) of the Slack app; with the signing secret, turns on "
        "the bot at /slack/events.",
    )
    slack_signing_secret: str | None = Field(
        default=None, description="Signing secret Slack signs its requests with."
    )
    slack_access_file: Path | None = Field(
        default=None,
        description="YAML map of Slack users (for direct messages) and channels to access "
        "groups; unset or unlisted: public documents only.",
    )
    slack_api_url: str | None = Field(
        default=None, description="Slack Web API base URL (a proxy); unset: Slack's own."
    )
    conversations_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the database saved conversations live in: "
        "postgresql+psycopg2://... for the pods of a cluster to share; unset: a SQLite file in "
        "the data folder (conversations.sqlite3), which one host's server processes share.",
    )
    conversation_retention_days: int = Field(
        default=90,
        ge=0,
        description="How long a saved conversation is kept after its last question, in days; "
        "older ones are deleted. 0: until its owner deletes it.",
    )
    upload_folder: str | None = Field(
        default=None,
        description="Where files dropped into the chat page go, as a document path: a "
        "subfolder of a lone local folder source ('uploads'), or a local folder source named "
        "in LOREHOUSE_SOURCE_URI ('uploads' with 'docs=/srv/docs uploads=/srv/uploads'). "
        "The API and the Dagster runs must share it (one volume); unset: no uploads.",
    )
    upload_max_bytes: int = Field(
        default=25 * 1024 * 1024,
        ge=1,
        description="The largest file the chat page takes, in bytes; a larger one is a 413 "
        "before it is stored. Above max_file_bytes, the parse stage would refuse it anyway.",
    )
    mcp_allowed_hosts: str = Field(
        default="127.0.0.1:*, localhost:*, [::1]:*",
        description="Host headers the MCP endpoint (/mcp) answers, as host:port (* for any "
        "port) separated by commas; a page elsewhere that points its own name at this server "
        "(DNS rebinding) is refused. `*`: any host, for a server behind a name of its own.",
    )
    mcp_api_key: str | None = Field(
        default=None,
        description="The key `lorehouse mcp` (stdio) answers as, from the keys file; required "
        "when API keys are, and checked again on every call, so a revoked key stops working.",
    )

    @field_validator("upload_folder")
    @classmethod
    def _upload_folder_is_a_plain_path(cls, value: str | None) -> str | None:
        """A relative path of plain folder names: a '..' or a dot-folder (which the
        inventory never lists) would put uploads where nothing indexes them."""
        if value is None or not value.strip():
            return None
        parts = value.strip().strip("/").split("/")
        if any(not part or part in {".", ".."} or part.startswith(".") for part in parts):
            raise ValueError(
                f"LOREHOUSE_UPLOAD_FOLDER must be a relative path of plain folder names, "
                f"not {value!r}"
            )
        return "/".join(parts)
