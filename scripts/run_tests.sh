#!/usr/bin/env bash
# The test suite as `make test` runs it, in three parts on one machine:
#   1. the tests marked `swarm` (a Dagster daemon launching runs, each a process of its own,
#      that mostly wait on one another) in a pytest process of their own, started first;
#   2. beside them, every other test not marked `serial`, on TEST_WORKERS workers;
#   3. then the tests marked `serial` (they assert latency or elapsed time) alone.
# The swarm's waits would otherwise hold one of the workers, or run alone at the end, while
# the cores idle. Its output is printed after the parallel run's, whole.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
WORKERS="${TEST_WORKERS:-2}"
swarm_log="$(mktemp)"
trap 'rm -f "$swarm_log"' EXIT

"$BIN/pytest" -m swarm -p no:cacheprovider >"$swarm_log" 2>&1 &
swarm=$!
"$BIN/pytest" -n "$WORKERS" --dist loadfile --no-loadscope-reorder \
    -m "not benchmark and not serial and not swarm" --durations=15
parallel=$?
wait "$swarm"
swarmed=$?
echo "---- tests marked swarm ----"
cat "$swarm_log"
if [ "$parallel" -ne 0 ] || [ "$swarmed" -ne 0 ]; then
    exit 1
fi
"$BIN/pytest" -m serial --durations=5
