"""A SharePoint site's document libraries (or a OneDrive) as a source, through Microsoft Graph.

Each library is read by its delta query: the first sync enumerates it, and the saved
`@odata.deltaLink` lists only what changed since (edits, moves, deletions). The delta is
asked with `Prefer: deltashowsharingchanges` so that a sharing change shows up as a change
of its item; Graph honours that for apps granted Sites.FullControl.All, and without it a
sharing change is seen when the file next changes. A 410 (the delta token is too old) starts
the enumeration again. A site's libraries are listed at every sync, so one added later is
read from then on.

Sharing becomes principals: users and groups granted on the item (by e-mail where Graph
gives one, else their id), site groups by name, and sharing links: "anonymous" is anyone,
"organization" is the tenant (the permission map's domain "organization").

Plain HTTP (httpx) rather than msgraph-sdk: the SDK and its Azure sign-in pull in dozens of
packages and hundreds of megabytes for the four calls this needs (token, delta, permissions,
content), and it signs in only against https token endpoints.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from lorehouse.errors import SourceError
from lorehouse.sources.connectors import (
    BearerAuth,
    ChangeSet,
    ConnectorItem,
    Principal,
    RetryPolicy,
    next_link,
    send,
)

log = logging.getLogger(__name__)

#: Asks the delta query to report sharing changes and deletions as changes of their items.
_DELTA_PREFER = "deltashowremovedasdeleted, deltatraversepermissiongaps, deltashowsharingchanges"
#: The domain a sharing link for "people in the organisation" is read as.
ORGANIZATION = "organization"


class SharePointConnector:
    """The document libraries of one SharePoint site (`sharepoint://SITE_ID`), or one drive
    (`sharepoint://drives/DRIVE_ID`: a OneDrive, or one library)."""

    kind = "sharepoint"

    def __init__(
        self,
        target: str,
        tenant_id: str | None,
        client_id: str | None,
        client_secret: str | None,
        api_url: str = "https://graph.microsoft.com",
        login_url: str = "https://login.microsoftonline.com",
        client: httpx.Client | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not (tenant_id and client_id and client_secret):
            raise SourceError(
                "a SharePoint source signs in as an app: LOREHOUSE_MSGRAPH_TENANT_ID, "
                "LOREHOUSE_MSGRAPH_CLIENT_ID and LOREHOUSE_MSGRAPH_CLIENT_SECRET"
            )
        if not target:
            raise SourceError("a SharePoint source names a site: sharepoint://SITE_ID")
        self.target = target
        self.api = api_url.rstrip("/") + "/v1.0"
        self.token_url = f"{login_url.rstrip('/')}/{tenant_id}/oauth2/v2.0/token"
        self.client_id, self.client_secret = client_id, client_secret
        self.client = client or httpx.Client(timeout=60.0)
        self.retry = retry or RetryPolicy()
        self._token = ""

    @property
    def uri(self) -> str:
        return f"sharepoint://{self.target}"

    # -- HTTP --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        """An app token by the client-credentials grant (first use, or after a 401)."""
        response = send(
            self.client,
            "POST",
            self.token_url,
            self.retry,
            data={
                "client_id": self.client_id,
                "client_secret": self.client_secret,
                "scope": "https://graph.microsoft.com/.default",
                "grant_type": "client_credentials",
            },
        )
        if response.status_code != 200:
            raise SourceError(f"Microsoft sign-in refused the app: {_error_message(response)}")
        token = _body(response, "Microsoft sign-in").get("access_token")
        if not isinstance(token, str) or not token:
            raise SourceError("Microsoft sign-in answered 200 without an access_token")
        self._token = token

    def _get(self, url: str, **headers: str) -> httpx.Response:
        if not self._token:
            self._refresh()
        absolute = url if url.startswith("http") else self.api + url
        return send(
            self.client,
            "GET",
            absolute,
            self.retry,
            refresh_auth=self._refresh,
            auth=BearerAuth(lambda: self._token),
            headers=headers,
        )

    def _json(self, url: str, **headers: str) -> Any:
        response = self._get(url, **headers)
        if response.status_code != 200:
            raise SourceError(f"Microsoft Graph {url}: {_error_message(response)}")
        return _body(response, f"Microsoft Graph {url}")

    # -- listing -------------------------------------------------------------------------------

    def changes(self, checkpoint: str | None) -> ChangeSet:
        """What changed in every library since `checkpoint`.

        A site's libraries are listed again at each sync (one request): a library added
        since is enumerated from its start, and a library removed or renamed since makes
        the sync a full enumeration, so that the items it held leave the index or take
        their new paths.
        """
        state = json.loads(checkpoint) if checkpoint else {}
        known: dict[str, dict[str, Any]] = state.get("drives") or {}
        current = self._drives()
        if known and any(
            drive_id not in current or current[drive_id]["name"] != drive["name"]
            for drive_id, drive in known.items()
        ):
            log.info(
                "SharePoint %s: a library was removed or renamed; listing every item", self.uri
            )
            return self.changes(None)
        drives = {**current, **known}
        added = sorted(set(current) - set(known)) if known else []
        if added:
            log.info("SharePoint %s: new libraries %s are enumerated", self.uri, ", ".join(added))
        complete = not state
        changed: dict[str, ConnectorItem] = {}
        deleted: list[str] = []
        for drive_id, drive in drives.items():
            try:
                self._delta(drive_id, drive, changed, deleted)
            except _Resync:
                log.warning("SharePoint drive %s asks for a full resync", drive_id)
                return self.changes(None)
        checkpoint = json.dumps({"drives": drives}, sort_keys=True)
        return ChangeSet(list(changed.values()), deleted, checkpoint, complete=complete)

    def _drives(self) -> dict[str, dict[str, Any]]:
        """The libraries to read, by id: their name (the first folder of their paths), no
        delta link yet and no folder known."""
        if self.target.startswith("drives/"):
            drive = self._json(f"/{self.target}")
            found = [drive]
        else:
            found = self._json(f"/sites/{self.target}/drives").get("value", [])
        return {
            d["id"]: {"name": d.get("name", d["id"]), "delta": None, "folders": {}} for d in found
        }

    def _delta(
        self,
        drive_id: str,
        drive: dict[str, Any],
        changed: dict[str, ConnectorItem],
        deleted: list[str],
    ) -> None:
        url = drive["delta"] or f"/drives/{drive_id}/root/delta"
        folders: dict[str, str] = drive["folders"]
        seen: set[str] = set()
        while True:
            response = self._get(url, Prefer=_DELTA_PREFER)
            if response.status_code == 410:
                raise _Resync
            if response.status_code != 200:
                raise SourceError(f"Microsoft Graph {url}: {_error_message(response)}")
            body = _body(response, f"Microsoft Graph {url}")
            for entry in body.get("value", []):
                if "deleted" in entry:
                    deleted.append(entry["id"])
                    changed.pop(entry["id"], None)
                    folders.pop(entry["id"], None)
                elif "root" in entry:
                    folders[entry["id"]] = drive["name"]
                elif "folder" in entry:
                    parent = folders.get(entry.get("parentReference", {}).get("id", ""))
                    folders[entry["id"]] = f"{parent or drive['name']}/{entry['name']}"
                elif "file" in entry:
                    parent = folders.get(entry.get("parentReference", {}).get("id", ""))
                    changed[entry["id"]] = self._item(drive_id, entry, parent or drive["name"])
            if "@odata.deltaLink" in body:
                drive["delta"] = next_link(self.api, body["@odata.deltaLink"], set())
                return
            url = body.get("@odata.nextLink", "")
            if not url:
                raise SourceError(f"Microsoft Graph delta of {drive_id} has no next page")
            next_link(self.api, url, seen)

    def _item(self, drive_id: str, entry: dict[str, Any], folder: str) -> ConnectorItem:
        return ConnectorItem(
            item_id=entry["id"],
            path=f"{folder}/{entry['name']}",
            version=entry.get("cTag") or entry.get("eTag") or entry["lastModifiedDateTime"],
            size_bytes=int(entry.get("size") or 0),
            modified_at=datetime.fromisoformat(
                entry["lastModifiedDateTime"].replace("Z", "+00:00")
            ),
            principals=self._principals(drive_id, entry["id"]),
            url=entry.get("webUrl", ""),
            media_type=drive_id,
        )

    def _principals(self, drive_id: str, item_id: str) -> tuple[Principal, ...] | None:
        """Who the item is shared with (directly or inherited); None (nobody) when Graph will
        not say."""
        try:
            entries = self._json(f"/drives/{drive_id}/items/{item_id}/permissions").get("value", [])
        except SourceError as error:
            log.warning("SharePoint item %s: permissions unreadable, so nobody: %s", item_id, error)
            return None
        found: list[Principal] = []
        for entry in entries:
            link = entry.get("link") or {}
            if link.get("scope") == "anonymous":
                found.append(Principal("anyone"))
            elif link.get("scope") == "organization":
                found.append(Principal("domain", ORGANIZATION))
            for identities in [
                entry.get("grantedToV2") or {},
                *entry.get("grantedToIdentitiesV2", []),
            ]:
                found.extend(_identity_principals(identities))
        return tuple(dict.fromkeys(found))

    # -- reading -------------------------------------------------------------------------------

    def fetch(self, item: ConnectorItem) -> bytes:
        """The file's bytes: Graph answers 302 to a short-lived download URL, which is read
        without the token (it is pre-authenticated, and on another host)."""
        url = f"/drives/{item.media_type}/items/{item.item_id}/content"
        response = self._get(url)
        if response.status_code in (301, 302, 303, 307, 308):
            location = response.headers["Location"]
            response = send(self.client, "GET", location, self.retry)
        if response.status_code != 200:
            raise SourceError(f"{item.path}: {_error_message(response)}")
        return response.content


def _body(response: httpx.Response, what: str) -> dict[str, Any]:
    """A JSON object answer; anything else (a sign-in page, a proxy's error) is the
    service failing, said as such."""
    try:
        body = response.json()
    except ValueError as error:
        kind = response.headers.get("Content-Type", "no content type")
        raise SourceError(f"{what}: answered {kind}, not JSON") from error
    if not isinstance(body, dict):
        raise SourceError(f"{what}: answered {type(body).__name__}, not a JSON object")
    return body


class _Resync(Exception):
    """Graph answered 410: the delta link expired, the enumeration starts again."""


def _identity_principals(identities: dict[str, Any]) -> list[Principal]:
    found = []
    user = identities.get("user")
    if user:
        found.append(Principal("user", user.get("email") or user.get("id", "")))
    group = identities.get("group")
    if group:
        found.append(Principal("group", group.get("email") or group.get("id", "")))
    site_group = identities.get("siteGroup")
    if site_group:
        found.append(Principal("group", site_group.get("displayName", "")))
    return found


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
        error = body.get("error")
        if isinstance(error, dict):
            return (
                f"HTTP {response.status_code} {error.get('code', '')}: {error.get('message', '')}"
            )
        return f"HTTP {response.status_code} {error}: {body.get('error_description', '')}"
    except (ValueError, AttributeError):
        return f"HTTP {response.status_code}"


#: The deployment settings this connector reads (`lorehouse.sources.registry`).
SETTINGS = (
    "msgraph_tenant_id",
    "msgraph_client_id",
    "msgraph_client_secret",
    "msgraph_api_url",
    "msgraph_login_url",
)
#: A link for the whole organization maps through the permission map, not to everyone.
ANYONE_DEFAULT: str | None = None


def connector_for(uri: str, options: Mapping[str, Any], folder: Path) -> SharePointConnector:
    """The connector of `sharepoint://SITE_ID` or `sharepoint://drives/DRIVE_ID`."""
    return SharePointConnector(
        uri.removeprefix("sharepoint://").strip("/"),
        options["msgraph_tenant_id"],
        options["msgraph_client_id"],
        options["msgraph_client_secret"],
        options["msgraph_api_url"],
        options["msgraph_login_url"],
    )
