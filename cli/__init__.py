"""The `lorehouse` command line: materialize, search, ask, serve and evaluate.

It builds what it runs through `lorehouse.wiring` and never imports the HTTP API, so the
commands work where the API's dependencies are not wanted (a pipeline worker, a notebook).
"""
