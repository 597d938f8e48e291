"""Settings: Sources.

Where the documents come from, and how each connected service is signed in to and
read: a connector's settings sit beside the others' so a source is configured in one place.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field, field_validator

from lorehouse.settings.machine import (
    BUNDLED_SAMPLE_CORPUS,
)


def source_sync_minutes(value: str) -> dict[str, float]:
    """`source_sync_minutes` read: source name -> minutes, with "*" for a lone number (every
    source)."""
    found: dict[str, float] = {}
    for entry in value.split():
        name, _, minutes = entry.rpartition("=")
        try:
            number = float(minutes)
        except ValueError:
            number = -1.0
        if number < 0 or (name and not name.replace("-", "").replace("_", "").isalnum()):
            raise ValueError(
                f"LOREHOUSE_SOURCE_SYNC_MINUTES: {entry!r} is neither minutes nor NAME=MINUTES"
            )
        found[name or "*"] = number
    return found


class SourceSettings(BaseModel):
    """The sources' settings: where documents come from and how each service is read."""

    #: The heading the configuration page lists these settings under.
    heading: ClassVar[str] = "Sources"

    source_uri: str = Field(
        default=str(BUNDLED_SAMPLE_CORPUS),
        description=(
            "Folder path, s3://bucket/prefix, gdrive://FOLDER_ID (a Google Drive folder), "
            "confluence+https://SITE?spaces=KEY,KEY (Confluence spaces), sharepoint://SITE_ID "
            "or sharepoint://drives/DRIVE_ID (SharePoint libraries, OneDrive), or http(s):// start "
            "URL of a web site (its sitemaps and the pages linked below that URL) holding "
            "the raw documents."
        ),
    )
    source_include: str | None = Field(
        default=None,
        description="Only the documents whose paths match these patterns are indexed, "
        "separated by spaces ('manuals/*.html reports/*.pdf'; '*' crosses folders, paths "
        "as in the index, a named source's name first); access files always count. Unset: "
        "every file of the source.",
    )
    source_permission_map: Path | None = Field(
        default=None,
        description=(
            "JSON file mapping a connected source's principals (users, groups, domains, "
            "anyone) to Lorehouse groups. A web site's pages belong to 'anyone', public "
            "unless the file maps 'anyone' to a group."
        ),
    )
    source_sync_minutes: str = Field(
        default="",
        description=(
            "How often a connected service (Drive, Confluence, SharePoint, a web site) is "
            "asked for its changes: minutes for every source, or NAME=MINUTES per named "
            "source ('drive=10 web=360'). An inventory before a source is due lists what it "
            "saw last without asking. Unset: at every inventory."
        ),
    )
    s3_endpoint_url: str | None = Field(
        default=None, description="S3-compatible endpoint (MinIO, moto); unset means AWS."
    )
    s3_region: str | None = Field(
        default=None, description="AWS region of the buckets (source, LanceDB, partitions)."
    )
    gdrive_service_account_file: Path | None = Field(
        default=None,
        description=(
            "Service account key (JSON) a gdrive://FOLDER_ID source reads Drive with; share "
            "the folder with its e-mail, or set a subject for domain-wide delegation."
        ),
    )
    gdrive_subject: str | None = Field(
        default=None,
        description="User the Drive service account acts as (domain-wide delegation).",
    )
    gdrive_api_url: str = Field(
        default="https://www.googleapis.com",
        description="Drive API origin; a proxy or a test server's in their place.",
    )
    confluence_email: str | None = Field(
        default=None,
        description="Account a Confluence Cloud source signs in as, with its API token.",
    )
    confluence_token: str | None = Field(
        default=None,
        description=(
            "API token (Cloud) or personal access token (Data Center) a "
            "confluence+https://SITE?spaces=KEY,KEY source reads with."
        ),
    )
    confluence_cloud: bool | None = Field(
        default=None,
        description=(
            "Whether the Confluence site is Cloud (v2 API, e-mail and API token) or Data "
            "Center (v1 API, personal access token); unset, a *.atlassian.net host is Cloud."
        ),
    )
    msgraph_tenant_id: str | None = Field(
        default=None, description="Microsoft Entra tenant a sharepoint:// source signs in to."
    )
    msgraph_client_id: str | None = Field(
        default=None,
        description=(
            "App (client) id a sharepoint:// source reads with: Sites.Read.All, and "
            "Sites.FullControl.All for sharing changes to show before the file next changes."
        ),
    )
    msgraph_client_secret: str | None = Field(
        default=None, description="The app's client secret (a Dagster resource reads it by EnvVar)."
    )
    msgraph_api_url: str = Field(
        default="https://graph.microsoft.com",
        description="Microsoft Graph origin; a national cloud's or a test server's in its place.",
    )
    msgraph_login_url: str = Field(
        default="https://login.microsoftonline.com",
        description="Microsoft identity platform origin the app's token comes from.",
    )
    web_max_pages: int = Field(
        default=10_000, ge=1, description="Pages a web site's crawl visits at most."
    )
    web_allowed_networks: str = Field(
        default="",
        description=(
            "Non-public networks a web crawl may connect to, as CIDRs or addresses separated "
            "by commas (`10.20.0.0/16, 127.0.0.1`): an intranet's. Loopback, private, "
            "link-local (the cloud's instance metadata) and other non-public addresses are "
            "refused otherwise, whatever a page links or redirects to."
        ),
    )
    web_page_seconds: float = Field(
        default=60.0,
        gt=0,
        description="The longest one page's download may take before it is recorded as failed.",
    )

    @field_validator("source_uri")
    @classmethod
    def _source_uri_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(
                "LOREHOUSE_SOURCE_URI must name a folder, an s3:// prefix, a gdrive://, "
                "confluence+https:// or sharepoint:// source, or a web site"
            )
        return value.strip()

    @field_validator("web_allowed_networks")
    @classmethod
    def _web_allowed_networks_parse(cls, value: str) -> str:
        from lorehouse.sources.addresses import parse_networks

        parse_networks(value)  # raises ValueError naming the entry it cannot read
        return value

    @field_validator("source_sync_minutes")
    @classmethod
    def _sync_minutes_readable(cls, value: str) -> str:
        source_sync_minutes(value)  # raises ValueError naming the entry it cannot read
        return value.strip()
