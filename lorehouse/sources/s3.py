"""An S3 prefix as a document source, over an injected boto3 client.

The client is built by the caller (the Dagster S3 resource, or a test against a local S3
server), so endpoint, region and credentials never live in this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lorehouse.errors import SourceError
from lorehouse.sources.base import SourceFile, is_hidden


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, prefix) of `s3://bucket/prefix`; the prefix always ends with '/' or is empty."""
    if not uri.startswith("s3://"):
        raise SourceError(f"not an S3 URI: {uri!r}")
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    if not bucket:
        raise SourceError(f"S3 URI {uri!r} names no bucket")
    prefix = prefix.strip("/")
    return bucket, f"{prefix}/" if prefix else ""


class S3PrefixSource:
    """Objects below an S3 prefix; keys ending in '/' (folder markers) are skipped."""

    def __init__(self, client: Any, uri: str) -> None:
        self.client = client
        self.bucket, self.prefix = parse_s3_uri(uri)
        self._uri = uri

    @property
    def uri(self) -> str:
        return self._uri

    def list_files(self) -> Iterator[SourceFile]:
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
                for item in page.get("Contents", []):
                    key: str = item["Key"]
                    rel_path = key[len(self.prefix) :]
                    if not rel_path or key.endswith("/") or is_hidden(rel_path):
                        continue
                    etag = str(item.get("ETag", "")).strip('"')
                    yield SourceFile(
                        rel_path=rel_path,
                        size_bytes=int(item["Size"]),
                        modified_at=item["LastModified"],
                        version=etag,
                        content_digest=f"etag:{etag}" if etag else None,
                    )
        except self.client.exceptions.NoSuchBucket as error:
            raise SourceError(f"S3 bucket {self.bucket!r} does not exist") from error

    def read_bytes(self, rel_path: str) -> bytes:
        key = self.prefix + rel_path
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
            return response["Body"].read()
        except Exception as error:
            raise SourceError(f"cannot read s3://{self.bucket}/{key}: {error}") from error

    def file_uri(self, rel_path: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{rel_path}"
