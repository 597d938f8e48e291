"""Lorehouse: turn a folder of documents into an evaluated, searchable knowledge base."""

from lorehouse.settings import apply_offline_environment

apply_offline_environment()

__version__ = "0.1.0"
