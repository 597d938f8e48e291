"""`python -m api.stdio`: the MCP tools over stdin and stdout, what `lorehouse mcp` runs.

The command line checks the deployment (the key, the index, the files a server reads) and
then becomes this process, so the web layer is loaded only by the servers.
"""

from __future__ import annotations

import logging
import sys

from api.mcp import run_stdio
from lorehouse.settings import get_settings


def main() -> None:
    """Serves until the client closes stdin; logs go to stderr, stdout is the protocol's."""
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    run_stdio(get_settings())


if __name__ == "__main__":
    main()
