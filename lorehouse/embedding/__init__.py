"""Text to vectors: `base` (the Embedder protocol and the factory a setting resolves through),
`minilm` (the bundled int8 ONNX all-MiniLM-L6-v2) and `litellm` (any hosted provider).

onnxruntime's telemetry is kept off by `lorehouse.offline.apply_offline_environment`, which
the package applies before any of its modules can import onnxruntime.
"""
