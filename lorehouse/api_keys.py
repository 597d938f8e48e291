"""API keys: who is calling and which access groups they belong to.

Keys live in a YAML file as SHA-256 digests, never in clear text, so the file can be read by
operators and backed up without leaking credentials:

    keys:
      - name: security-team
        sha256: 9f86d081...
        groups: [security]
        created: '2026-12-01T09:30:00Z'

Without a keys file every caller is anonymous and sees public documents only. A server reads
the file again when it changes (`KeysFileWatch`), so a revoked key stops working at once.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from lorehouse.errors import validation_summary

log = logging.getLogger(__name__)

ANONYMOUS = "anonymous"
#: Seconds between two looks at whether the keys file changed: a stat, so cheap, but not one
#: per request.
KEYS_FILE_CHECK_SECONDS = 1.0


class KeyEntry(BaseModel):
    """One key as stored: a label, the digest of the secret, its groups, when it was made
    (keys made before that was stored have none)."""

    name: str = Field(min_length=1, max_length=128)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    groups: list[str] = Field(default_factory=list)
    created: datetime | None = None

    @field_validator("name")
    @classmethod
    def _readable_name(cls, name: str) -> str:
        """The name is who the key is for in every log line and feedback record: one line of
        printable text, no blank name and no spaces at its ends to tell two keys apart."""
        if not _readable(name):
            raise ValueError("a key's name is printable text, not blank, no spaces at its ends")
        return name

    @field_validator("groups")
    @classmethod
    def _readable_groups(cls, groups: list[str]) -> list[str]:
        """A blank group or one with a line break matches no document's access list, so a
        key holding one was meant to hold some other group."""
        if not all(_readable(group) for group in groups):
            raise ValueError("an access group is printable text, not blank, no spaces at its ends")
        return groups


def _readable(text: str) -> bool:
    return bool(text) and text == text.strip() and text.isprintable()


class KeysFile(BaseModel):
    keys: list[KeyEntry] = Field(default_factory=list)


class KeysFileError(ValueError):
    """The keys file is missing or malformed; the server refuses to start without it."""


@dataclass(frozen=True)
class Caller:
    """The authenticated caller; `groups` decide which restricted chunks they may see."""

    name: str
    groups: tuple[str, ...]


def _one_line(error: yaml.YAMLError | ValidationError) -> str:
    """What is wrong with the file and where, on one line for a log or a command's error
    (YAML's own message draws the line with a caret under it)."""
    if isinstance(error, ValidationError):
        return validation_summary(error)
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"{error.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(error).split())


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyRing:
    """The keys of one file, checked in constant time."""

    def __init__(self, entries: list[KeyEntry]) -> None:
        self._entries = entries

    @property
    def entries(self) -> list[KeyEntry]:
        """The keys as stored, in file order."""
        return list(self._entries)

    @classmethod
    def load(cls, path: Path) -> KeyRing:
        try:
            parsed = KeysFile.model_validate(yaml.safe_load(path.read_text()) or {})
        except OSError as error:
            raise KeysFileError(f"cannot read API keys file {path}: {error}") from error
        except (yaml.YAMLError, ValidationError) as error:
            raise KeysFileError(f"API keys file {path} is malformed: {_one_line(error)}") from error
        return cls(parsed.keys)

    def identify(self, presented: str) -> Caller | None:
        """The caller a presented key belongs to, or None."""
        presented_digest = digest(presented)
        match = None
        for entry in self._entries:
            # Compare against every entry so timing does not tell how far the scan got.
            if hmac.compare_digest(entry.sha256, presented_digest):
                match = entry
        return Caller(match.name, tuple(match.groups)) if match else None


class KeysFileWatch:
    """The keys of a file, read again when the file changes, so that a key created or
    revoked while a server runs is accepted or refused without a restart.

    Whether it changed (modification time, size, inode) is looked at on a request, at most
    every `check_seconds`. A file that cannot be read or is malformed leaves the keys read
    last in use, with one warning per change.
    """

    def __init__(
        self,
        path: Path,
        check_seconds: float = KEYS_FILE_CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.check_seconds = check_seconds
        self._clock = clock
        self._stamp = _file_stamp(path)
        self._ring = KeyRing.load(path)  # at start a bad file is an error, not a warning
        self._checked = clock()

    def identify(self, presented: str) -> Caller | None:
        """The caller a presented key belongs to in the file as it is now, or None."""
        self._reload_if_changed()
        return self._ring.identify(presented)

    def _reload_if_changed(self) -> None:
        # Requests on the event loop and in worker threads may both get here: at worst two
        # read the changed file, and each replaces the ring whole.
        now = self._clock()
        if now - self._checked < self.check_seconds:
            return
        self._checked = now
        stamp = _file_stamp(self.path)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self._ring = KeyRing.load(self.path)
        except KeysFileError as error:
            log.warning("%s; the keys read before stay in use", error)


def _file_stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size, status.st_ino


def add_key(path: Path, name: str, groups: list[str]) -> str:
    """Creates a key, stores its digest in `path` and returns the key (shown once)."""
    existing = KeyRing.load(path).entries if path.exists() else []
    if any(entry.name == name for entry in existing):
        raise KeysFileError(f"a key named {name!r} already exists in {path}")
    key = "lh_" + secrets.token_urlsafe(32)
    try:
        entry = KeyEntry(
            name=name,
            sha256=digest(key),
            groups=groups,
            created=datetime.now(UTC).replace(microsecond=0),
        )
    except ValidationError as error:
        raise KeysFileError(validation_summary(error)) from error
    _write_keys(path, [*existing, entry])
    return key


def revoke_key(path: Path, name: str) -> KeyEntry:
    """Removes the key named `name` from `path`; the entry removed."""
    entries = KeyRing.load(path).entries
    kept = [entry for entry in entries if entry.name != name]
    if len(kept) == len(entries):
        names = ", ".join(repr(entry.name) for entry in entries) or "none"
        raise KeysFileError(f"no key named {name!r} in {path} (its keys: {names})")
    _write_keys(path, kept)
    return next(entry for entry in entries if entry.name == name)


def _write_keys(path: Path, entries: list[KeyEntry]) -> None:
    """Writes the file whole and then renames it into place, so a server reading it while
    it is written reads the old file or the new one, never half of one."""
    text = yaml.safe_dump(
        KeysFile(keys=entries).model_dump(mode="json", exclude_none=True), sort_keys=False
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text)
        if path.exists():
            temporary.chmod(path.stat().st_mode & 0o7777)
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)
