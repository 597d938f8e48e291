"""Text to vectors: `base` (the Embedder protocol and the factory a setting resolves through),
`minilm` (the bundled int8 ONNX all-MiniLM-L6-v2) and `litellm` (any hosted provider)."""

import os

# onnxruntime starts Microsoft's telemetry client (native 1DS code) when it is imported, on
# Linux too: it keeps events under ~/.cache/Microsoft/DeveloperTools/.onnxruntime and, a few
# seconds later and again every few seconds, resolves mobile.events.data.microsoft.com to
# upload them. `onnxruntime.disable_telemetry_events()` does not stop that client; this
# variable, read when the library loads, keeps it from starting. Set here, before any module
# of this package can import onnxruntime; a value the user set wins.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
