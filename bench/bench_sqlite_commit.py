"""Cost of one caption commit on SQLite: rollback journal (SQLite's default) vs write-ahead log (ours).

The service commits each final (one small INSERT in its own transaction) before sending it, so this is on
the final's latency path. Prints median and p95 per commit for both journal modes, measured in one run.

    python bench/bench_sqlite_commit.py --commits 200
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path


def measure(path: Path, mode: str, commits: int) -> tuple[float, float]:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute(f"PRAGMA journal_mode={mode}")
    connection.execute("CREATE TABLE captions (id INTEGER PRIMARY KEY, text TEXT)")
    times = []
    for _ in range(commits):
        started = time.perf_counter()
        connection.execute("BEGIN")
        connection.execute("INSERT INTO captions (text) VALUES (?)", ("a caption of about forty words " * 6,))
        connection.execute("COMMIT")
        times.append(time.perf_counter() - started)
    connection.close()
    times.sort()
    return times[len(times) // 2] * 1e3, times[int(len(times) * 0.95)] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("delete", "wal"):
            median, p95 = measure(Path(tmp) / f"{mode}.db", mode, args.commits)
            print(f"journal_mode={mode:6s} commit median {median:.2f} ms  p95 {p95:.2f} ms")


if __name__ == "__main__":
    main()
