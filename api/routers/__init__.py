"""The API's routes, one module per resource; `api.main.create_app` includes them all."""
