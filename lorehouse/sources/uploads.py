"""The upload folder: files people drop into the chat page, each with the groups it is for.

An upload is written into a local folder that is part of the deployment's source, so the
same inventory, parse and index runs as for every other document take it from there: the
API only stores the file, Dagster's runs index it (the upload sensor in
pipelines/sensors.py requests them). Each upload has a folder of its own,
`<owner>/<id>/<name>`, with its access sidecar `<name>.meta.json` next to it:

- the sidecar is written before the file, and the file is removed before the sidecar, so the
  inventory never lists an upload without its groups;
- the folder's own `_access.json` names no group that anyone holds, so a file that lost its
  sidecar is hidden rather than public;
- `<owner>` is a digest of the uploader's name, so listing one's uploads reads one folder,
  and no name a caller chooses becomes a path.

Both files are written under a dot-name and renamed into place: the inventory never lists
dot-files, so it sees a whole upload or none.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path, PurePosixPath

from lorehouse.errors import LorehouseError
from lorehouse.inventory import document_id
from lorehouse.models import NOBODY_GROUP, FileType
from lorehouse.sniffing import READABLE_EXTENSIONS, extension_type
from lorehouse.sources.base import FOLDER_ACL_FILE, SIDECAR_SUFFIX

#: The longest file name kept, in characters; a longer one keeps its start and extension.
MAX_NAME_CHARS = 120
_ID = re.compile(r"^[0-9a-f]{16}$")
#: Characters a kept file name never holds: path separators, controls, and what shells and
#: file systems treat specially.
_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]')


class Refusal(StrEnum):
    """Why an upload was not stored; the API answers each with its own status."""

    TOO_LARGE = "too_large"
    UNREADABLE_TYPE = "unreadable_type"
    BAD_NAME = "bad_name"
    BAD_GROUPS = "bad_groups"
    NO_GROUPS = "no_groups"


class UploadRefused(LorehouseError):
    """An upload that is not stored, with what the uploader can do about it."""

    def __init__(self, refusal: Refusal, message: str) -> None:
        super().__init__(message)
        self.refusal = refusal
        self.message = message


@dataclass(frozen=True)
class Upload:
    """One stored upload, as its sidecar describes it."""

    id: str
    filename: str
    #: The document's path in the index (the upload folder's path, then the file's).
    path: str
    groups: tuple[str, ...]
    size_bytes: int
    uploaded_at: datetime

    @property
    def doc_id(self) -> str:
        return document_id(self.path)


def kept_name(filename: str) -> str:
    """The name an upload is stored under: the last part of what the browser sent, in NFC,
    without unsafe characters or leading dots, at most MAX_NAME_CHARS long with its
    extension kept. Raises UploadRefused when nothing usable is left or the name is one the
    inventory reads as an access file."""
    name = re.split(r"[/\\]", filename)[-1]
    name = _UNSAFE.sub("_", unicodedata.normalize("NFC", name)).strip().lstrip(".").strip()
    if not name:
        raise UploadRefused(Refusal.BAD_NAME, f"{filename!r} is not a file name")
    if name == FOLDER_ACL_FILE or name.endswith(SIDECAR_SUFFIX):
        raise UploadRefused(
            Refusal.BAD_NAME, f"{name!r} is the name of an access file, not of a document"
        )
    if len(name) > MAX_NAME_CHARS:
        suffix = PurePosixPath(name).suffix[:20]
        name = name[: MAX_NAME_CHARS - len(suffix)].rstrip() + suffix
    return name


def chosen_groups(chosen: Sequence[str], own: Sequence[str]) -> tuple[str, ...]:
    """The groups an upload is for: at least one, each one the uploader belongs to. An
    upload is never public, and nobody shares a file with a group they are not in."""
    if not own:
        raise UploadRefused(
            Refusal.NO_GROUPS,
            "uploads need a key with at least one group, and yours has none: an upload is "
            "never public",
        )
    wanted = sorted({group.strip() for group in chosen if group.strip()})
    if not wanted:
        raise UploadRefused(
            Refusal.BAD_GROUPS,
            f"choose the groups the file is for, among yours: {', '.join(sorted(own))}",
        )
    foreign = [group for group in wanted if group not in own]
    if foreign:
        raise UploadRefused(
            Refusal.BAD_GROUPS,
            f"you are not in {', '.join(foreign)}; choose among yours: {', '.join(sorted(own))}",
        )
    return tuple(wanted)


def readable_type(name: str) -> None:
    """Refuses a name whose extension no parser reads."""
    if extension_type(name) is FileType.UNKNOWN:
        raise UploadRefused(
            Refusal.UNREADABLE_TYPE,
            f"{name!r} is not a type Lorehouse reads; it reads {', '.join(READABLE_EXTENSIONS)}",
        )


class UploadFolder:
    """The uploads of one deployment, under `root` on disk and `prefix` in document paths."""

    def __init__(self, root: Path, prefix: str, max_bytes: int) -> None:
        self.root = root
        self.prefix = prefix.strip("/")
        self.max_bytes = max_bytes

    def too_large(self) -> UploadRefused:
        return UploadRefused(
            Refusal.TOO_LARGE, f"the file is larger than the {self.max_bytes} bytes uploads take"
        )

    def check(
        self, filename: str, groups: Sequence[str], owner_groups: Sequence[str]
    ) -> tuple[str, tuple[str, ...]]:
        """The name an upload would be stored under and the groups it would be for; raises
        UploadRefused before anything is read or written."""
        name = kept_name(filename)
        readable_type(name)
        return name, chosen_groups(groups, owner_groups)

    def store(
        self,
        owner: str,
        filename: str,
        data: bytes,
        groups: Sequence[str],
        owner_groups: Sequence[str],
    ) -> Upload:
        """Stores `data` as an upload of `owner` for `groups` (among `owner_groups`)."""
        name, allowed = self.check(filename, groups, owner_groups)
        if len(data) > self.max_bytes:
            raise self.too_large()
        self.prepare()
        upload_id = secrets.token_hex(8)
        folder = self._owner_folder(owner) / upload_id
        folder.mkdir(parents=True)
        uploaded_at = datetime.now(UTC)
        sidecar = {
            "groups": list(allowed),
            "filename": name,
            "uploaded_at": uploaded_at.isoformat(),
        }
        _write_whole(folder / (name + SIDECAR_SUFFIX), json.dumps(sidecar).encode())
        _write_whole(folder / name, data)
        return Upload(
            upload_id, name, self._path(owner, upload_id, name), allowed, len(data), uploaded_at
        )

    def uploads(self, owner: str) -> list[Upload]:
        """The owner's uploads, newest first."""
        folder = self._owner_folder(owner)
        if not folder.is_dir():
            return []
        found = [self._read(owner, entry.name) for entry in os.scandir(folder)]
        return sorted(
            (upload for upload in found if upload is not None),
            key=lambda upload: upload.uploaded_at,
            reverse=True,
        )

    def find(self, owner: str, upload_id: str) -> Upload | None:
        """The owner's upload `upload_id`; None for another's, or one that is not there."""
        return self._read(owner, upload_id) if _ID.match(upload_id) else None

    def delete(self, owner: str, upload_id: str) -> bool:
        """Removes the upload, file first: the next inventory takes it out of the index."""
        upload = self.find(owner, upload_id)
        if upload is None:
            return False
        folder = self._owner_folder(owner) / upload_id
        (folder / upload.filename).unlink(missing_ok=True)
        shutil.rmtree(folder)
        return True

    def _read(self, owner: str, upload_id: str) -> Upload | None:
        folder = self._owner_folder(owner) / upload_id
        try:
            (sidecar,) = [p for p in folder.iterdir() if p.name.endswith(SIDECAR_SUFFIX)]
            saved = json.loads(sidecar.read_bytes())
            name = sidecar.name.removesuffix(SIDECAR_SUFFIX)
            size = (folder / name).lstat().st_size
        except (OSError, ValueError):
            return None  # being written, removed meanwhile, or not an upload's folder
        return Upload(
            upload_id,
            name,
            self._path(owner, upload_id, name),
            tuple(saved["groups"]),
            size,
            datetime.fromisoformat(saved["uploaded_at"]),
        )

    def _owner_folder(self, owner: str) -> Path:
        return self.root / _owner_key(owner)

    def _path(self, owner: str, upload_id: str, name: str) -> str:
        return "/".join(part for part in (self.prefix, _owner_key(owner), upload_id, name) if part)

    def prepare(self) -> None:
        """Makes the folder, and its rule that hides a file without a sidecar, so the source
        lists it before anything is uploaded."""
        self.root.mkdir(parents=True, exist_ok=True)
        rule = self.root / FOLDER_ACL_FILE
        if not rule.exists():
            _write_whole(rule, json.dumps({"groups": [NOBODY_GROUP]}).encode())


def _owner_key(owner: str) -> str:
    return hashlib.sha256(owner.encode()).hexdigest()[:16]


def _write_whole(path: Path, data: bytes) -> None:
    """Writes `data` under a dot-name, then renames it to `path`: a reader sees all or none."""
    partial = path.with_name(f".{secrets.token_hex(4)}.partial")
    with partial.open("xb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    partial.replace(path)
