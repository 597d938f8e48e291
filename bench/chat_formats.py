"""What the OpenAI-compatible format costs against /v1/ask, and whether citations survive it.

A real `lorehouse serve` over the materialized sample corpus answers the questions of
bench/ask.py, in turns, through POST /v1/ask and POST /v1/chat/completions, each plain and
streamed, in the same run. Reported per format: median and p95 of the whole answer and, when
streamed, of the first piece of text; and, for the chat format, the share of /v1/ask's
citations whose source line (number, path and link to the passage) is in the message's text,
which is all a client that shows only text keeps.

    .venv/bin/python bench/chat_formats.py [--data-dir DIR] [--repeat 3]

Without --data-dir the sample corpus is materialized into a temporary folder first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))

from ask import QUESTIONS, _materialize  # noqa: E402 - bench/ask.py, beside this file
from load import start_server, stop_process_group, wait_until_healthy  # noqa: E402


def _timed(client: httpx.Client, path: str, body: dict) -> tuple[float, float | None, str]:
    """(seconds to the whole answer, seconds to its first text when streamed, the body)."""
    started = time.perf_counter()
    first: float | None = None
    with client.stream("POST", path, json=body) as response:
        response.raise_for_status()
        text = []
        for line in response.iter_lines():
            text.append(line)
            if first is None and body.get("stream") and _has_text(line):
                first = time.perf_counter() - started
    return time.perf_counter() - started, first, "\n".join(text)


def _has_text(line: str) -> bool:
    """Whether a Server-Sent Events line carries answer text (a token, or a content delta)."""
    if not line.startswith("data: ") or line == "data: [DONE]":
        return False
    data = json.loads(line[6:])
    if "text" in data:
        return bool(data["text"])
    choices = data.get("choices") or [{}]
    return bool(choices[0].get("delta", {}).get("content"))


def _survived(ask: dict, content: str) -> tuple[int, int]:
    """(citations of /v1/ask whose source line the chat content holds, citations)."""
    lines = content.split("\n\nSources:\n", 1)[-1].splitlines()
    kept = 0
    for citation in ask["citations"]:
        prefix, link = f"[{citation['number']}] ", f"#chunk={citation['chunk_id']}"
        kept += any(
            line.startswith(prefix) and citation["rel_path"] in line and line.endswith(link)
            for line in lines
        )
    return kept, len(ask["citations"])


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="chat-formats-"))
    data_dir = arguments.data_dir or work / "data"
    if arguments.data_dir is None:
        _materialize(data_dir)
    server = start_server(data_dir, work, work)
    try:
        wait_until_healthy(server, timeout_seconds=120)
        totals: dict[str, list[float]] = {}
        firsts: dict[str, list[float]] = {}
        kept = cited = 0
        with httpx.Client(base_url=server.base_url, timeout=120) as client:
            for round_number in range(arguments.repeat):
                for number, question in enumerate(QUESTIONS):
                    ask_body = {"question": question}
                    chat_body = {"messages": [{"role": "user", "content": question}]}
                    runs = [
                        ("/v1/ask", "/v1/ask", ask_body),
                        ("/v1/chat/completions", "/v1/chat/completions", chat_body),
                        ("/v1/ask, streamed", "/v1/ask", {**ask_body, "stream": True}),
                        (
                            "/v1/chat/completions, streamed",
                            "/v1/chat/completions",
                            {**chat_body, "stream": True},
                        ),
                    ]
                    # Each question's formats in a turning order, so none is always first.
                    shift = (round_number + number) % len(runs)
                    bodies: dict[str, str] = {}
                    for label, path, body in runs[shift:] + runs[:shift]:
                        total, first, text = _timed(client, path, body)
                        totals.setdefault(label, []).append(total * 1000)
                        if first is not None:
                            firsts.setdefault(label, []).append(first * 1000)
                        bodies[label] = text
                    chat = json.loads(bodies["/v1/chat/completions"])
                    survived, of = _survived(
                        json.loads(bodies["/v1/ask"]), chat["choices"][0]["message"]["content"]
                    )
                    kept, cited = kept + survived, cited + of
    finally:
        stop_process_group(server.process)
    print("| format | answers | median ms | p95 ms | first text median ms |")
    print("|---|---:|---:|---:|---:|")
    for label, values in totals.items():
        first = f"{statistics.median(firsts[label]):.0f}" if label in firsts else "-"
        print(
            f"| {label} | {len(values)} | {statistics.median(values):.0f} | "
            f"{_percentile(values, 0.95):.0f} | {first} |"
        )
    print(f"\ncitations whose source line is in the chat message's text: {kept} of {cited}")


if __name__ == "__main__":
    main()
