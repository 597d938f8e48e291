"""A Google Drive folder as a source, read with a service account through the Drive v3 REST API.

The first sync walks the folder tree (`files.list` per folder) and reads each file's sharing
(`permissions.list`); later syncs read Drive's change feed from the saved page token
(`changes.list`), which reports edits, moves, deletions, lost access and sharing changes
alike. A sharing change moves the file's `version` but not its content or modified time, so
the inventory re-labels the document's chunks without parsing or embedding it again.

Google Docs, Sheets and Slides are exported as DOCX, XLSX and PPTX (their tables and
headings survive); other files are downloaded as they are.

Plain HTTP (httpx) rather than google-api-python-client: the client installs the discovery
documents of every Google API, and it ignores Retry-After, which this connector honours per
request (`send`). google-auth signs the service account's token requests.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import httpx

from lorehouse.errors import SourceError
from lorehouse.sources.connectors import (
    BearerAuth,
    ChangeSet,
    ConnectorItem,
    Principal,
    RetryPolicy,
    send,
)

log = logging.getLogger(__name__)

FOLDER = "application/vnd.google-apps.folder"
#: Google's own formats, exported as the Office file Lorehouse parses with tables and headings.
EXPORTS = {
    "application/vnd.google-apps.document": (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ".docx",
    ),
    "application/vnd.google-apps.spreadsheet": (
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        ".xlsx",
    ),
    "application/vnd.google-apps.presentation": (
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        ".pptx",
    ),
}
_FILE_FIELDS = "id,name,mimeType,version,size,modifiedTime,parents,trashed,webViewLink"
_SCOPES = ["https://www.googleapis.com/auth/drive.readonly"]


class GoogleDriveConnector:
    """The files below one Drive folder (shared drives included)."""

    kind = "gdrive"

    def __init__(
        self,
        folder_id: str,
        service_account_file: Path | None,
        subject: str | None = None,
        api_url: str = "https://www.googleapis.com",
        client: httpx.Client | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not folder_id:
            raise SourceError("a Google Drive source needs a folder id: gdrive://FOLDER_ID")
        self.folder_id = folder_id
        self.base = api_url.rstrip("/") + "/drive/v3"
        self.client = client or httpx.Client(timeout=60.0)
        self.retry = retry or RetryPolicy()
        self._credentials = _service_account(service_account_file, subject)

    @property
    def uri(self) -> str:
        return f"gdrive://{self.folder_id}"

    # -- HTTP --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Gets a new access token (the first one, or after a 401 said it expired)."""
        from google.auth.exceptions import GoogleAuthError
        from google.auth.transport.requests import Request

        try:
            self._credentials.refresh(Request())
        except GoogleAuthError as error:
            raise SourceError(f"Google Drive refused the service account: {error}") from error

    def _get(self, path: str, **params: Any) -> httpx.Response:
        if not self._credentials.token:
            self._refresh()
        response = send(
            self.client,
            "GET",
            f"{self.base}/{path}",
            self.retry,
            refresh_auth=self._refresh,
            params={"supportsAllDrives": "true", **params},
            auth=BearerAuth(lambda: self._credentials.token),
        )
        if response.status_code != 200:
            raise SourceError(f"Google Drive {path}: {_error_message(response)}")
        return response

    def _pages(self, path: str, key: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every entry of a paged list, following nextPageToken."""
        token = None
        while True:
            body = self._get(path, **params, **({"pageToken": token} if token else {})).json()
            yield from body.get(key, [])
            token = body.get("nextPageToken")
            if not token:
                return

    # -- listing -------------------------------------------------------------------------------

    def changes(self, checkpoint: str | None) -> ChangeSet:
        if checkpoint is None:
            return self._walk()
        state = json.loads(checkpoint)
        folders: dict[str, str] = state["folders"]
        changed: dict[str, ConnectorItem] = {}
        deleted: list[str] = []
        token = state["token"]
        while True:
            body = self._get(
                "changes",
                pageToken=token,
                includeRemoved="true",
                includeItemsFromAllDrives="true",
                pageSize=1000,
                fields=f"nextPageToken,newStartPageToken,changes(removed,fileId,file({_FILE_FIELDS}))",
            ).json()
            for change in body.get("changes", []):
                file = change.get("file")
                if change.get("removed") or file is None or file.get("trashed"):
                    deleted.append(change["fileId"])
                    folders.pop(change["fileId"], None)
                    continue
                parent = next((p for p in file.get("parents", []) if p in folders), None)
                if parent is None:  # moved out of the folder, or never in it
                    deleted.append(file["id"])
                    folders.pop(file["id"], None)
                elif file["mimeType"] == FOLDER:
                    folders[file["id"]] = _join(folders[parent], file["name"])
                else:
                    changed[file["id"]] = self._item(file, folders[parent])
            if "newStartPageToken" in body:
                token = body["newStartPageToken"]
                break
            token = body["nextPageToken"]
        checkpoint = json.dumps({"token": token, "folders": folders}, sort_keys=True)
        return ChangeSet(list(changed.values()), deleted, checkpoint)

    def _walk(self) -> ChangeSet:
        """Every file below the folder; the change feed's token is taken first, so nothing
        that changes during the walk is missed by the next sync."""
        token = self._get("changes/startPageToken").json()["startPageToken"]
        folders = {self.folder_id: ""}
        pending = [self.folder_id]
        items = []
        while pending:
            folder = pending.pop()
            for file in self._pages(
                "files",
                "files",
                q=f"'{folder}' in parents and trashed = false",
                fields=f"nextPageToken,files({_FILE_FIELDS})",
                includeItemsFromAllDrives="true",
                corpora="allDrives",
                pageSize=1000,
            ):
                if file["mimeType"] == FOLDER:
                    folders[file["id"]] = _join(folders[folder], file["name"])
                    pending.append(file["id"])
                else:
                    items.append(self._item(file, folders[folder]))
        checkpoint = json.dumps({"token": token, "folders": folders}, sort_keys=True)
        return ChangeSet(items, [], checkpoint, complete=True)

    def _item(self, file: dict[str, Any], folder: str) -> ConnectorItem:
        name = file["name"].replace("/", "_")
        extension = EXPORTS.get(file["mimeType"], ("", ""))[1]
        if extension and PurePosixPath(name).suffix.lower() != extension:
            name += extension
        return ConnectorItem(
            item_id=file["id"],
            path=_join(folder, name),
            version=str(file.get("version", file.get("modifiedTime", ""))),
            size_bytes=int(file.get("size") or 0),
            modified_at=datetime.fromisoformat(file["modifiedTime"].replace("Z", "+00:00")),
            principals=self._principals(file["id"]),
            url=file.get("webViewLink") or f"https://drive.google.com/file/d/{file['id']}",
            media_type=file["mimeType"],
        )

    def _principals(self, file_id: str) -> tuple[Principal, ...] | None:
        """Who the file is shared with; None (nobody may read it) when Drive will not say."""
        try:
            permissions = list(
                self._pages(
                    f"files/{file_id}/permissions",
                    "permissions",
                    fields="nextPageToken,permissions(type,role,emailAddress,domain,deleted)",
                    pageSize=100,
                )
            )
        except SourceError as error:
            log.warning("Drive file %s: permissions unreadable, so nobody: %s", file_id, error)
            return None
        found = []
        for permission in permissions:
            if permission.get("deleted"):
                continue
            kind = permission.get("type")
            if kind in ("user", "group"):
                found.append(Principal(kind, permission.get("emailAddress", "")))
            elif kind == "domain":
                found.append(Principal("domain", permission.get("domain", "")))
            elif kind == "anyone":
                found.append(Principal("anyone"))
        return tuple(found)

    # -- reading -------------------------------------------------------------------------------

    def fetch(self, item: ConnectorItem) -> bytes:
        export = EXPORTS.get(item.media_type)
        try:
            if export:
                return self._get(f"files/{item.item_id}/export", mimeType=export[0]).content
            return self._get(f"files/{item.item_id}", alt="media").content
        except SourceError as error:
            raise SourceError(f"{item.path}: {error}") from error


def _service_account(path: Path | None, subject: str | None) -> Any:
    if path is None:
        raise SourceError(
            "a Google Drive source needs a service account key "
            "(LOREHOUSE_GDRIVE_SERVICE_ACCOUNT_FILE)"
        )
    from google.oauth2 import service_account

    try:
        credentials = service_account.Credentials.from_service_account_file(
            str(path), scopes=_SCOPES
        )
    except (OSError, ValueError) as error:
        raise SourceError(f"service account key {path} cannot be read: {error}") from error
    return credentials.with_subject(subject) if subject else credentials


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _error_message(response: httpx.Response) -> str:
    """Google's JSON error as one line: status, reason and message."""
    try:
        error = response.json()["error"]
        reason = (error.get("errors") or [{}])[0].get("reason", "")
        return f"HTTP {response.status_code} {reason}: {error.get('message', '')}".strip()
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"


#: The deployment settings this connector reads (`lorehouse.sources.registry`).
SETTINGS = ("gdrive_service_account_file", "gdrive_subject", "gdrive_api_url")
#: "Anyone with the link" is not the whole company.
ANYONE_DEFAULT: str | None = None


def connector_for(uri: str, options: Mapping[str, Any], folder: Path) -> GoogleDriveConnector:
    """The connector of `gdrive://FOLDER_ID` (nothing is cached under `folder`)."""
    return GoogleDriveConnector(
        uri.removeprefix("gdrive://").strip("/"),
        options["gdrive_service_account_file"],
        options["gdrive_subject"],
        options["gdrive_api_url"],
    )
