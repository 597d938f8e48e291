"""Asset checks, run one step per asset rather than one step per check.

Under the multiprocess executor, and under `k8s_job_executor` on a cluster, every op of a run
is a process (a pod) of its own that loads the code location before it does anything, and an
asset check is an op. Lorehouse's checks each read a few rows or a listing, so a step per
check cost more in process starts than in checking. Here the checks of one asset run in one
`multi_asset_check` step: each still has its own name, result, severity and blocking flag in
the UI, and can be run alone (`can_subset`).

A check is a plain function of its resources, declared with `@asset_check(asset=...)` in the
module of the stage it checks, so tests and the CLI call it directly; `checks_of(modules)`
builds the Dagster definitions for the modules a code location or a test loads.
"""

# No `from __future__ import annotations`: Dagster reads the `context` annotation at run time.
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType
from typing import TypeVar

import dagster as dg

CheckFunction = TypeVar("CheckFunction", bound=Callable[..., dg.AssetCheckResult])


@dataclass(frozen=True)
class _Check:
    function: Callable[..., dg.AssetCheckResult]
    asset: dg.AssetKey
    blocking: bool

    @property
    def name(self) -> str:
        return self.function.__name__

    @cached_property
    def resource_keys(self) -> list[str]:
        return list(inspect.signature(self.function).parameters)

    def spec(self) -> dg.AssetCheckSpec:
        return dg.AssetCheckSpec(
            self.name,
            asset=self.asset,
            blocking=self.blocking,
            description=inspect.getdoc(self.function),
        )


_DECLARED: dict[tuple[str, str], _Check] = {}


def asset_check(
    *, asset: str | dg.AssetsDefinition, blocking: bool = False
) -> Callable[[CheckFunction], CheckFunction]:
    """Declares `function` a check of `asset`; its parameters name the resources it reads.

    `blocking`: when the check fails, the assets downstream of `asset` do not run.
    """
    key = asset.key if isinstance(asset, dg.AssetsDefinition) else dg.AssetKey(asset)

    def declare(function: CheckFunction) -> CheckFunction:
        _DECLARED[(function.__module__, function.__name__)] = _Check(function, key, blocking)
        return function

    return declare


def checks_of(modules: Sequence[ModuleType]) -> list[dg.AssetChecksDefinition]:
    """The checks the modules declare, one definition (one step) per checked asset."""
    names = {module.__name__ for module in modules}
    by_asset: dict[dg.AssetKey, list[_Check]] = {}
    for (module, _), check in _DECLARED.items():
        if module in names:
            by_asset.setdefault(check.asset, []).append(check)
    return [_one_step(asset, checks) for asset, checks in by_asset.items()]


def _one_step(asset: dg.AssetKey, checks: list[_Check]) -> dg.AssetChecksDefinition:
    resources = {key for check in checks for key in check.resource_keys}

    @dg.multi_asset_check(
        name=f"{asset.to_python_identifier()}_checks",
        specs=[check.spec() for check in checks],
        can_subset=True,
        required_resource_keys=resources,
        description=f"The checks of {asset.to_user_string()}, run in one step.",
    )
    def run_checks(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        selected = {key.name for key in context.selected_asset_check_keys}
        for check in checks:
            if check.name not in selected:
                continue
            result = check.function(
                **{key: getattr(context.resources, key) for key in check.resource_keys}
            )
            yield result._replace(asset_key=asset, check_name=check.name)

    return run_checks
