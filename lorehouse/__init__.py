"""Lorehouse: turn a folder of documents into an evaluated, searchable knowledge base."""

from lorehouse.lance_import import defer_namespace_client
from lorehouse.offline import apply_offline_environment

apply_offline_environment()
# Before any module of the package imports lancedb (lorehouse.lance_import says why).
defer_namespace_client()

__version__ = "0.1.0"
