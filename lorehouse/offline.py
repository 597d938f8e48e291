"""Process-wide switches that keep third-party libraries off the network.

Libraries below us reach for the network on import or first use unless told not to
(Hugging Face Hub, litellm's cost map, unstructured, Dagster's and onnxruntime's telemetry).
The switches are environment variables read when each library loads, so the package sets
them on import (`lorehouse/__init__.py`), before any of them loads, and this module imports
nothing of the package: the records and contracts know nothing of how a deployment is
configured.
"""

from __future__ import annotations

import os

_OFFLINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "UNSTRUCTURED_DISABLE_NOTICE": "1",
    "DO_NOT_TRACK": "1",
    "DAGSTER_DISABLE_TELEMETRY": "1",
    # onnxruntime (the embedder's runtime, and PyMuPDF imports it too) starts Microsoft's
    # native telemetry client when it is loaded, which resolves
    # mobile.events.data.microsoft.com every few seconds; `disable_telemetry_events()` does
    # not stop it, this variable read at load time does.
    "ORT_DISABLE_TELEMETRY": "1",
}


def apply_offline_environment() -> None:
    """Keep third-party libraries from phoning home; an explicit value set by the user wins."""
    for name, value in _OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
