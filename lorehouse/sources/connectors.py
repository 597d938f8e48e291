"""Connectors: sources that are services (a web site, a wiki, a drive), read by change listing.

A connector lists items with stable ids, versions and the principals allowed to read each
(taken from the service's own sharing settings), yields the items changed and deleted since
a checkpoint, and fetches an item's bytes. `ConnectorSource` turns one into the
`DocumentSource` the inventory reads: it keeps the checkpoint and the last known state of
every item in a file of its own, so a nightly run asks the service only for what changed,
while the inventory still sees the whole source (and drops what left it).

Permissions become Lorehouse groups through a `PermissionMap`. An item whose permissions
could not be read is indexed as readable by nobody (fail closed), never as public.

Longer than most modules because it holds what every connector shares beside the protocol
it implements: the checkpoint and item-state file, the permission map and the HTTP sender
with its retries, which each connector would otherwise repeat.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import httpx

from lorehouse.errors import SourceError
from lorehouse.models import NOBODY_GROUP, PUBLIC_GROUP
from lorehouse.retry import backoff_seconds
from lorehouse.sources.base import SourceFile

log = logging.getLogger(__name__)

NOBODY = NOBODY_GROUP

PrincipalKind = Literal["user", "group", "domain", "anyone", "lorehouse"]


@dataclass(frozen=True)
class Principal:
    """Who a service lets read an item: a user or group (by e-mail or id), a whole domain,
    anyone (a public link or page), or a Lorehouse group named in the connector's own
    configuration (`lorehouse`)."""

    kind: PrincipalKind
    value: str = ""


@dataclass(frozen=True)
class ConnectorItem:
    """An item as the service lists it, before anyone reads its content."""

    item_id: str
    #: Where the item sits in the source, as a relative POSIX path with the extension of what
    #: `fetch` returns ("ENG/Onboarding.html"): the document's path in Lorehouse.
    path: str
    #: Changes whenever the content may have (a revision, an ETag, a modified time).
    version: str
    size_bytes: int
    modified_at: datetime
    #: None when the service would not say who may read it: nobody may, then.
    principals: tuple[Principal, ...] | None
    #: Where a person opens the item.
    url: str
    #: Why the item cannot be fetched, when the listing already knows (a page that answered
    #: 503 after retries); the parse stage records it as the document's failure.
    failure: str | None = None
    #: The service's own type of the item, where fetching depends on it (a Google Doc is
    #: exported, a PDF downloaded).
    media_type: str = ""


@dataclass
class ChangeSet:
    """What changed since a checkpoint, and the checkpoint to ask from next time."""

    changed: list[ConnectorItem]
    #: Ids of items deleted (or no longer visible to the connector).
    deleted: list[str]
    checkpoint: str
    #: True when `changed` lists every item (a first listing, a crawl): items known before
    #: and missing from it are gone.
    complete: bool = False


class Connector(Protocol):
    """A service holding documents, read by change listing."""

    #: What kind of source this is ("web", "confluence"), for logs and document URIs.
    kind: str

    @property
    def uri(self) -> str:
        """Where the source lives, as the user configured it."""
        ...

    def changes(self, checkpoint: str | None) -> ChangeSet:
        """Items changed and deleted since `checkpoint` (None: everything, `complete`)."""
        ...

    def fetch(self, item: ConnectorItem) -> bytes:
        """The item's content; raises SourceError saying why it cannot be had."""
        ...


@dataclass(frozen=True)
class PermissionMap:
    """How a service's principals become Lorehouse groups, from a mapping file:

    ```json
    {"users": {"ana@example.com": ["finance"]},
     "groups": {"finance-team@example.com": "finance"},
     "domains": {"example.com": "staff"},
     "anyone": "public"}
    ```

    `anyone` (a public link, a public page) maps to a group, to "public", or, when left out,
    to `anyone_default`. A principal the file does not map gives no group; an item none of
    whose principals maps is readable by nobody, never by everyone.
    """

    users: Mapping[str, Sequence[str]] = field(default_factory=dict)
    groups: Mapping[str, str] = field(default_factory=dict)
    domains: Mapping[str, str] = field(default_factory=dict)
    anyone: str | None = None

    @classmethod
    def load(cls, path: Path | None) -> PermissionMap:
        """The map in `path` (JSON); an empty map without one."""
        if path is None:
            return cls()
        try:
            payload = json.loads(Path(path).read_text(encoding="utf-8"))
            users = {k.lower(): list(v) for k, v in payload.get("users", {}).items()}
            groups = {k.lower(): str(v) for k, v in payload.get("groups", {}).items()}
            domains = {k.lower(): str(v) for k, v in payload.get("domains", {}).items()}
            anyone = payload.get("anyone")
        except (OSError, ValueError, AttributeError, TypeError) as error:
            raise SourceError(f"permission map {path} cannot be read: {error}") from error
        for group in [*groups.values(), *domains.values(), *(g for v in users.values() for g in v)]:
            if not isinstance(group, str) or group in (PUBLIC_GROUP, NOBODY):
                raise SourceError(f"permission map {path}: {group!r} is not a group name")
        return cls(users, groups, domains, anyone if isinstance(anyone, str) else None)

    def groups_for(
        self, principals: Sequence[Principal] | None, anyone_default: str | None = None
    ) -> tuple[str, ...]:
        """The Lorehouse groups that may read an item; () means public."""
        if principals is None:
            return (NOBODY,)
        found: set[str] = set()
        for principal in principals:
            value = principal.value.strip().lower()
            if principal.kind == "anyone":
                group = self.anyone or anyone_default
                if group == "public":
                    return ()
                if group:
                    found.add(group)
            elif principal.kind == "lorehouse":
                found.add(principal.value)
            elif principal.kind == "user":
                found.update(self.users.get(value, ()))
            elif principal.kind == "group" and value in self.groups:
                found.add(self.groups[value])
            elif principal.kind == "domain" and value in self.domains:
                found.add(self.domains[value])
        return tuple(sorted(found)) or (NOBODY,)


@dataclass
class ConnectorState:
    """The checkpoint and every known item of one source, kept as one JSON file.

    Written to a temporary file and renamed over the old one, so a run killed while saving
    leaves the previous state, whose checkpoint then lists those changes again.
    """

    path: Path
    checkpoint: str | None = None
    items: dict[str, ConnectorItem] = field(default_factory=dict)
    #: When the service last answered a whole sync: None before the first.
    synced_at: datetime | None = None
    #: Why the last sync failed, while it has not succeeded since.
    error: str | None = None
    #: Item id -> the path it is listed and read under: assigned once, at the sync that
    #: first lists the item, so two items whose service paths collide keep theirs apart.
    paths: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> ConnectorState:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path)
        except ValueError as error:
            log.warning("connector state %s is unreadable (%s); listing everything", path, error)
            return cls(path)
        items = {}
        for raw in payload.get("items", []):
            principals = raw.pop("principals")
            raw["modified_at"] = datetime.fromisoformat(raw["modified_at"])
            items[raw["item_id"]] = ConnectorItem(
                **raw,
                principals=None
                if principals is None
                else tuple(Principal(kind, value) for kind, value in principals),
            )
        synced_at = payload.get("synced_at")
        state = cls(
            path,
            payload.get("checkpoint"),
            items,
            datetime.fromisoformat(synced_at) if synced_at else None,
            payload.get("error"),
            dict(payload.get("paths") or {}),
        )
        if set(state.paths) != set(state.items):
            state.assign_paths()  # a state saved before paths were kept
        return state

    def apply(self, changes: ChangeSet) -> None:
        """Takes a change set in: changed items replace their old state, deleted ones go."""
        if changes.complete:
            self.items = {}
        for item_id in changes.deleted:
            self.items.pop(item_id, None)
        for item in changes.changed:
            self.items[item.item_id] = item
        self.checkpoint = changes.checkpoint
        self.assign_paths()

    def assign_paths(self) -> None:
        """Gives every item a path no other item holds, normalised (`safe_path`).

        An item keeps the path it had while its service path stays the same, so a second
        item arriving at that path never takes it over: the newcomer gets a digest of its
        id in its name (`dup (3f2a9c1e).md`). Reads look items up by this path, so two
        items the service names alike can never serve each other's bytes.
        """
        taken: dict[str, str] = {}
        assigned: dict[str, str] = {}
        ordered = sorted(self.items.values(), key=lambda i: (i.path, i.item_id))
        for item in ordered:
            before = self.paths.get(item.item_id)
            natural = safe_path(item.path)
            if before in (natural, _disambiguated(natural, item.item_id)) and before not in taken:
                taken[before] = item.item_id
                assigned[item.item_id] = before
        for item in ordered:
            if item.item_id in assigned:
                continue
            natural = safe_path(item.path)
            path = natural if natural not in taken else _disambiguated(natural, item.item_id)
            digits = 8
            while path in taken:  # a digest prefix shared too: longer until unique
                digits += 4
                path = _disambiguated(natural, item.item_id, digits)
            taken[path] = item.item_id
            assigned[item.item_id] = path
        self.paths = assigned

    def by_path(self) -> dict[str, ConnectorItem]:
        """Every item under its assigned path."""
        return {self.paths[item_id]: item for item_id, item in self.items.items()}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        items = []
        for item in sorted(self.items.values(), key=lambda i: i.item_id):
            raw = asdict(item)
            raw["modified_at"] = item.modified_at.isoformat()
            raw["principals"] = (
                None if item.principals is None else [[p.kind, p.value] for p in item.principals]
            )
            items.append(raw)
        temporary = self.path.with_suffix(".tmp")
        payload = {
            "checkpoint": self.checkpoint,
            "synced_at": self.synced_at.isoformat() if self.synced_at else None,
            "error": self.error,
            "items": items,
            "paths": self.paths,
        }
        temporary.write_text(json.dumps(payload))
        temporary.replace(self.path)


SyncOutcome = Literal["synced", "not due", "failed"]


@dataclass(frozen=True)
class SourceSync:
    """What one inventory's sync of a connected source did, for its run's report."""

    uri: str
    kind: str
    outcome: SyncOutcome
    #: Items the source lists after this sync (the last known ones when it was not asked).
    items: int
    changed: int = 0
    deleted: int = 0
    #: The last sync the service answered in whole: None when it never has.
    synced_at: datetime | None = None
    error: str | None = None


class ConnectorSource:
    """A connector as the `DocumentSource` the inventory lists and the stages read.

    Listing syncs first: it asks the connector for the changes since the saved checkpoint,
    applies them to the saved state and lists every known item, with its groups from
    `permissions`. With `sync_every`, a source synced less than that long ago is not asked
    and lists what it saw last, so each source keeps its own pace (a large site crawled
    nightly, a drive every few minutes). Two items may not share a path: the later id gets
    its id in the path, so neither is lost.
    """

    def __init__(
        self,
        connector: Connector,
        state_path: Path,
        permissions: PermissionMap | None = None,
        anyone_default: str | None = None,
        sync_every: timedelta | None = None,
    ) -> None:
        self.connector = connector
        self.state_path = state_path
        self.permissions = permissions or PermissionMap()
        self.anyone_default = anyone_default
        self.sync_every = sync_every
        self._by_path: dict[str, ConnectorItem] = {}
        #: This source's sync in the current listing, once it has run.
        self.last_sync: SourceSync | None = None

    @property
    def uri(self) -> str:
        return self.connector.uri

    def sync(self) -> ConnectorState:
        """Brings the saved state up to date with the service, when the source is due.

        A failed sync is saved with its reason (so freshness checks and the next run see it)
        and raised as SourceError; the state keeps what the last good sync listed.
        """
        state = ConnectorState.load(self.state_path)
        now = datetime.now(UTC)
        if (
            self.sync_every is not None
            and state.synced_at is not None
            and state.error is None
            and now - state.synced_at < self.sync_every
        ):
            self.last_sync = self._report(state, "not due")
            return state
        try:
            changes = self.connector.changes(state.checkpoint)
        except Exception as error:
            # A service answering what its API does not promise (a sign-in page for JSON, a
            # token reply without a token, a malformed link) fails this source alone, with
            # its reason: its items keep their last known state and access, and the other
            # sources' changes, restrictions above all, still apply.
            reason = str(error) if isinstance(error, SourceError) else _unexpected(error)
            state.error = reason
            state.save()
            self.last_sync = self._report(state, "failed")
            if isinstance(error, SourceError):
                raise
            raise SourceError(f"{self.uri}: {reason}") from error
        state.apply(changes)
        state.synced_at, state.error = now, None
        state.save()
        self.last_sync = self._report(state, "synced", len(changes.changed), len(changes.deleted))
        return state

    def _report(
        self, state: ConnectorState, outcome: SyncOutcome, changed: int = 0, deleted: int = 0
    ) -> SourceSync:
        return SourceSync(
            self.uri,
            self.connector.kind,
            outcome,
            len(state.items),
            changed,
            deleted,
            state.synced_at,
            state.error,
        )

    def list_files(self) -> Iterator[SourceFile]:
        yield from self.listing(self.sync())

    def list_known(self) -> Iterator[SourceFile]:
        """What the last good sync listed, without asking the service: what a source that
        cannot be reached keeps while others go on (`CompositeSource`)."""
        yield from self.listing(ConnectorState.load(self.state_path))

    def listing(self, state: ConnectorState) -> Iterator[SourceFile]:
        """The files of a synced `state`, each under the path the state assigned it."""
        self._by_path = state.by_path()
        forget_bodies_except(self._bodies, {_body_key(item) for item in state.items.values()})
        for path, item in sorted(self._by_path.items()):
            groups = self.permissions.groups_for(item.principals, self.anyone_default)
            yield SourceFile(
                rel_path=path,
                size_bytes=item.size_bytes,
                modified_at=item.modified_at,
                version=item.version,
                content_digest=f"{self.connector.kind}:{item.version}",
                acl_groups=groups,
            )

    def _item(self, rel_path: str) -> ConnectorItem:
        if not self._by_path:
            self._by_path = ConnectorState.load(self.state_path).by_path()
        item = self._by_path.get(rel_path)
        if item is None:
            raise SourceError(f"{rel_path} is not an item of {self.uri}")
        return item

    @property
    def _bodies(self) -> Path:
        return self.state_path.parent / "bodies"

    def read_bytes(self, rel_path: str) -> bytes:
        """The item's bytes, fetched from the service once per version.

        The inventory reads an item to hash it and work out its type; the parse stage
        reads it again. Both get the bytes the first read stored, so what is parsed is what
        was hashed and labelled with the item's access, even if the service answers
        otherwise the second time. A connector that keeps its own bodies by digest (a web
        crawl) is read directly.
        """
        item = self._item(rel_path)
        if item.failure:
            raise SourceError(item.failure)
        if getattr(self.connector, "keeps_bodies", False):
            return self.connector.fetch(item)
        stored = self._bodies / _body_key(item)
        try:
            return stored.read_bytes()
        except FileNotFoundError:
            pass
        data = self.connector.fetch(item)
        store_body(stored, data)
        return data

    def file_uri(self, rel_path: str) -> str:
        try:
            return self._item(rel_path).url
        except SourceError:
            return f"{self.uri.rstrip('/')}/{rel_path}"


def store_body(path: Path, data: bytes) -> None:
    """Keeps fetched bytes at `path`, written whole or not at all: a temporary file of this
    process, renamed over, so a reader never opens half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    temporary.replace(path)


def forget_bodies_except(folder: Path, names: set[str]) -> None:
    """Drops the stored bodies in `folder` not named in `names` (items or pages that changed
    or left); a body still being written is left to its writer."""
    if folder.is_dir():
        for stored in folder.iterdir():
            if stored.name not in names and not stored.name.endswith(".tmp"):
                stored.unlink(missing_ok=True)


class BearerAuth(httpx.Auth):
    """`Authorization: Bearer` with the token `current()` gives at each request, so a token
    renewed after a 401 is the one the retry sends."""

    def __init__(self, current: Callable[[], str]) -> None:
        self.current = current

    def auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
        request.headers["Authorization"] = f"Bearer {self.current()}"
        yield request


@dataclass(frozen=True)
class RetryPolicy:
    """How a connector waits out a busy or failing service before it gives up on a request."""

    attempts: int = 4
    #: The first wait after a 5xx or a dropped connection; it doubles after each (with jitter).
    backoff_seconds: float = 1.0
    #: The longest a Retry-After is honoured; a service asking for longer fails the item.
    max_wait_seconds: float = 60.0


def send(
    client: httpx.Client,
    method: str,
    url: str,
    policy: RetryPolicy,
    refresh_auth: Callable[[], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    stream: bool = False,
    **kwargs: Any,
) -> httpx.Response:
    """A request that waits out 429 (its Retry-After) and 5xx, and renews an expired token
    once on 401; any other answer is returned for the caller to judge (with `stream`, its
    body unread: the caller reads and closes it).

    Raises SourceError naming the last answer when the attempts run out, so the caller can
    record it against the one item it concerns.
    """
    refreshed = False
    last = "no answer"
    auth = kwargs.pop("auth", httpx.USE_CLIENT_DEFAULT)
    try:
        request = client.build_request(method, url, **kwargs)
    except (httpx.InvalidURL, ValueError) as error:
        raise SourceError(f"{method} {url!r} is not a URL that can be asked: {error}") from error
    for attempt in range(policy.attempts):
        try:
            response = client.send(request, stream=stream, auth=auth)
        except httpx.UnsupportedProtocol as error:
            raise SourceError(f"{method} {url}: {error}") from error
        except httpx.TransportError as error:
            last = f"{type(error).__name__}: {error}"
            asked = None
        else:
            if response.status_code == 401 and refresh_auth is not None and not refreshed:
                response.close()
                refresh_auth()
                refreshed = True
                continue
            if response.status_code != 429 and response.status_code < 500:
                return response
            response.close()
            last = f"HTTP {response.status_code}"
            asked = _retry_after(response)
            if asked is not None and asked > policy.max_wait_seconds:
                raise SourceError(f"{method} {url}: {last}, asked to wait {asked:.0f} s")
        if attempt + 1 < policy.attempts:
            sleep(backoff_seconds(attempt + 1, policy.backoff_seconds, asked))
    raise SourceError(f"{method} {url}: {last} after {policy.attempts} attempts")


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds a Retry-After header asks for (seconds, fractional or a date)."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


#: List pages a connector follows at most in one listing: a service whose cursors never end
#: (or never repeat) fails that source instead of being asked for ever. At a service's usual
#: 200-1,000 items a page, this is millions of items.
MAX_LIST_PAGES = 10_000


def next_link(origin_of: str, link: str, seen: set[str]) -> str:
    """A list's next-page link, checked before it is asked for: on the service's own origin
    (scheme, host and port of `origin_of`), so the token it is sent with never leaves for
    another host; not seen before in this listing; and within `MAX_LIST_PAGES`."""
    if _origin(link) != _origin(origin_of):
        raise SourceError(f"a next-page link leads off {_origin(origin_of)}: {link!r}")
    if link in seen:
        raise SourceError(f"the listing's next-page link comes round again: {link!r}")
    if len(seen) >= MAX_LIST_PAGES:
        raise SourceError(f"the listing runs past {MAX_LIST_PAGES:,} pages")
    seen.add(link)
    return link


def _origin(url: str) -> tuple[str, str, int | None]:
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError as error:
        raise SourceError(f"not a URL: {url!r}") from error
    return parts.scheme, (parts.hostname or "").lower(), port


def safe_path(path: str) -> str:
    """A service's name for an item as a relative POSIX path that stays inside the source:
    empty and `.` segments dropped, `..` kept as a name (`_..`), never as a step up,
    backslashes and control characters made `_`."""
    parts = []
    for part in path.replace("\\", "/").split("/"):
        part = "".join("_" if ord(c) < 32 or ord(c) == 127 else c for c in part)
        if part in ("", "."):
            continue
        parts.append("_.." if part == ".." else part)
    return "/".join(parts) or "untitled"


def _disambiguated(path: str, item_id: str, digits: int = 8) -> str:
    """`path` with a digest of the item's id in its name: a stable, unique name for the
    second item the service gives one path (ids may hold `/` or be URLs)."""
    pure = PurePosixPath(path)
    tag = hashlib.sha256(item_id.encode()).hexdigest()[:digits]
    return str(pure.with_name(f"{pure.stem} ({tag}){pure.suffix}"))


def _body_key(item: ConnectorItem) -> str:
    """The stored bytes' file name: one per item and version."""
    return hashlib.sha256(f"{item.item_id}\0{item.version}".encode()).hexdigest()[:32]


def _unexpected(error: Exception) -> str:
    """A connector's unexpected failure in one line: the service answered what its API
    does not promise."""
    return f"unexpected answer from the service ({type(error).__name__}: {error})"
