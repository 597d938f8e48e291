"""Dagster assets, one module per stage, each a few lines over the lorehouse library."""
