"""Text to vectors: `base` (the Embedder protocol and the factory a setting resolves through),
`minilm` (the bundled int8 ONNX all-MiniLM-L6-v2) and `litellm` (any hosted provider)."""
