"""API keys: who is calling and which access groups they belong to.

Keys live in a YAML file as SHA-256 digests, never in clear text, so the file can be read by
operators and backed up without leaking credentials:

    keys:
      - name: security-team
        sha256: 9f86d081...
        groups: [security]

Without a keys file every caller is anonymous and sees public documents only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from lorehouse.errors import validation_summary

ANONYMOUS = "anonymous"


class KeyEntry(BaseModel):
    """One key as stored: a label, the digest of the secret, its groups."""

    name: str = Field(min_length=1, max_length=128)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    groups: list[str] = Field(default_factory=list)

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


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyRing:
    """The keys of one file, checked in constant time."""

    def __init__(self, entries: list[KeyEntry]) -> None:
        self._entries = entries

    @classmethod
    def load(cls, path: Path) -> KeyRing:
        try:
            parsed = KeysFile.model_validate(yaml.safe_load(path.read_text()) or {})
        except OSError as error:
            raise KeysFileError(f"cannot read API keys file {path}: {error}") from error
        except (yaml.YAMLError, ValidationError) as error:
            raise KeysFileError(f"API keys file {path} is malformed: {error}") from error
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


def add_key(path: Path, name: str, groups: list[str]) -> str:
    """Creates a key, stores its digest in `path` and returns the key (shown once)."""
    existing = KeyRing.load(path)._entries if path.exists() else []
    if any(entry.name == name for entry in existing):
        raise KeysFileError(f"a key named {name!r} already exists in {path}")
    key = "lh_" + secrets.token_urlsafe(32)
    try:
        entry = KeyEntry(name=name, sha256=digest(key), groups=groups)
    except ValidationError as error:
        raise KeysFileError(validation_summary(error)) from error
    entries = [*existing, entry]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(KeysFile(keys=entries).model_dump(), sort_keys=False))
    return key
