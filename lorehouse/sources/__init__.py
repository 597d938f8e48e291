"""Where raw bytes come from: a local folder or an S3 prefix, behind one small interface."""

from lorehouse.sources.base import DocumentSource, SourceFile, is_sidecar
from lorehouse.sources.local import LocalFolderSource
from lorehouse.sources.s3 import S3PrefixSource, parse_s3_uri

__all__ = [
    "DocumentSource",
    "LocalFolderSource",
    "S3PrefixSource",
    "SourceFile",
    "is_sidecar",
    "parse_s3_uri",
]
