"""The `lorehouse` command line: materialize, search, ask, serve and evaluate.

It builds what it runs through `lorehouse.wiring` and never imports the HTTP API, so the
commands work where the API's dependencies are not wanted (a pipeline worker, a notebook).
"""

import sys

# Every `lorehouse` command is a fresh process whose start is mostly importing Dagster,
# LanceDB, pandas and pydantic. Where the environment sets PYTHONDONTWRITEBYTECODE (some
# images and shells do), Python would compile all of them from source on every command,
# which doubles a warm `lorehouse search`. Their compiled bytecode is written beside them
# again; on a read-only install Python leaves it unwritten without a word, as it always does.
sys.dont_write_bytecode = False
