"""bench/scale.py's accounting of a build that was paused: the time it was stopped is not
reported as build time."""

from __future__ import annotations

from tests.bench_scripts import bench_script


def test_a_stop_between_memory_samples_is_taken_out_of_the_span_it_falls_in() -> None:
    scale = bench_script("scale")
    # Samples every half second, then nothing for 100 s (the tree was stopped), then again.
    times = [0.0, 0.5, 1.0, 1.5, 101.5, 102.0, 102.5]
    assert scale.paused_seconds(times, 0.0, 102.5) == 100.0
    # A stage that started during the stop is charged only its part of it.
    assert scale.paused_seconds(times, 51.5, 102.5) == 50.0
    # A stage that ended before the stop was not paused.
    assert scale.paused_seconds(times, 0.0, 1.5) == 0.0


def test_slow_samples_are_not_mistaken_for_a_pause() -> None:
    scale = bench_script("scale")
    # Reading a large tree's memory maps can take seconds, below the gap that means a stop.
    times = [0.0, 3.0, 7.0, 7.5, 12.0]
    assert scale.paused_seconds(times, 0.0, 12.0) == 0.0


def test_partitions_split_into_contiguous_ranges_of_near_equal_size() -> None:
    runs = bench_script("partition_runs")
    keys = [f"p{n:02d}" for n in range(16)]
    assert runs.ranges(keys, 1) == ["p00...p15"]
    assert runs.ranges(keys, 2) == ["p00...p07", "p08...p15"]
    assert runs.ranges(keys, 3) == ["p00...p05", "p06...p10", "p11...p15"]


def test_a_partition_by_partition_build_projects_to_pods_in_rounds_of_partitions() -> None:
    build = bench_script("partition_build")
    # 100,000 documents at 0.4 s each in 256 partitions: 156.25 s a partition.
    hours = build.projection(60.0, 0.4, 100_000, 256)
    assert hours[1] == round((60 + 256 * 156.25) / 3600, 2)
    # 256 partitions on 128 pods are two rounds; on 32 pods, eight.
    assert hours[128] == round((60 + 2 * 156.25) / 3600, 2)
    assert hours[32] == round((60 + 8 * 156.25) / 3600, 2)
