"""Importing `lancedb` without paying for the Lance namespace REST client up front.

`import lancedb` imports `lance_namespace_urllib3_client`, whose package `__init__` builds
some 370 API methods validated by pydantic: a large part of loading the whole code location,
paid again by every Dagster run and step process, every `lorehouse` command and every API
worker, for a client that an index on disk or object storage never calls
(docs/benchmarks.md, "Start-up"). The package's `__init__` calls
`defer_namespace_client()`, before any of its modules imports `lancedb`.
"""

from __future__ import annotations

import importlib.util
import sys

#: The REST client of Lance namespaces, which `lancedb` imports with itself.
NAMESPACE_CLIENT = "lance_namespace_urllib3_client"


def defer_namespace_client() -> None:
    """Put the namespace client's package in place with its `__init__` held back.

    Its submodules (the models `lance_namespace` re-exports) import as before, and the first
    name asked of the package itself runs the `__init__` then, so whatever does use the
    client gets all of it. Does nothing once the package is imported.
    """
    if NAMESPACE_CLIENT in sys.modules:
        return
    spec = importlib.util.find_spec(NAMESPACE_CLIENT)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def load(name: str) -> object:
        del package.__getattr__  # a name the __init__ itself asks for is not looked up here
        loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = load  # type: ignore[method-assign]
    sys.modules[NAMESPACE_CLIENT] = package
