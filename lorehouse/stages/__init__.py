"""The pipeline's stages as plain functions, one module per asset group.

Each runner takes its stores and the objects the wiring builds, does the work for the
documents that changed and returns a report; the Dagster assets of the same name call it,
and so do the CLI and the tests, so the same logic runs under any orchestrator.

    inventory -> parse -> chunk -> enrich -> features -> embed
"""
