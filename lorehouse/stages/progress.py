"""How a stage reports progress: (items done, items in total), after each item or batch.

Dagster assets turn it into log lines and the CLI into a progress bar.
"""

from __future__ import annotations

from collections.abc import Callable

ProgressCallback = Callable[[int, int], None]
