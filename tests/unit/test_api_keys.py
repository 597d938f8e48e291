"""The keys file as a server reads it: again when it changes, at most once a second, and the
last good keys kept when it breaks."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from lorehouse.api_keys import KeyRing, KeysFileError, KeysFileWatch, add_key, revoke_key


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_change_counts_at_the_next_look_and_a_look_is_at_most_once_a_second(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys.yaml"
    leaving, staying = add_key(path, "leaving", []), add_key(path, "staying", ["hr"])
    clock = Clock()
    watch = KeysFileWatch(path, check_seconds=1.0, clock=clock)
    assert watch.identify(leaving) is not None

    revoke_key(path, "leaving")
    clock.now = 0.5  # within the second: not looked at yet
    assert watch.identify(leaving) is not None
    clock.now = 1.0
    assert watch.identify(leaving) is None
    caller = watch.identify(staying)
    assert caller is not None and caller.name == "staying" and caller.groups == ("hr",)


def test_a_broken_or_missing_file_keeps_the_last_good_keys_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.yaml"
    key = add_key(path, "ops", ["security"])
    clock = Clock()
    watch = KeysFileWatch(path, clock=clock)
    path.write_text("keys: [{name: ops, sha256: \n")
    with caplog.at_level(logging.WARNING, logger="lorehouse.api_keys"):
        for second in range(1, 4):
            clock.now = second
            assert watch.identify(key) is not None
        path.unlink()
        clock.now = 5
        assert watch.identify(key) is not None
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 2, warnings  # one for the broken file, one for the missing one
    assert "is malformed: " in warnings[0] and "\n" not in warnings[0]
    assert "cannot read" in warnings[1]

    add_key(path, "ci", [])
    clock.now = 7
    assert watch.identify(key) is None  # the file as it is now: ci's alone


def test_keys_are_written_whole_with_the_date_made_and_revoked_by_name(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    add_key(path, "ops", [])
    add_key(path, "ci", ["build"])
    entries = KeyRing.load(path).entries
    assert [entry.name for entry in entries] == ["ops", "ci"]
    assert all(entry.created is not None and entry.created.tzinfo for entry in entries)
    assert revoke_key(path, "ops").name == "ops"
    assert [entry.name for entry in KeyRing.load(path).entries] == ["ci"]
    with pytest.raises(KeysFileError, match=r"no key named 'ops'.*'ci'"):
        revoke_key(path, "ops")
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left beside it
    # A file written before keys had a date still reads.
    path.write_text(f"keys:\n- name: old\n  sha256: '{'0' * 64}'\n  groups: []\n")
    assert KeyRing.load(path).entries[0].created is None
