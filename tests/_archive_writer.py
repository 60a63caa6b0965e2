"""Child process of the archive kill test: archives turns 0..n-1 of an episode into a SQLite
file one by one, printing `archived <user_index> <True|False>` after each commit and sleeping
between archivals. Usage: python _archive_writer.py DB EPISODE N SLEEP_S"""

from __future__ import annotations

import sys
import time

from kv_context_env.sim.archive import TurnArchive
from kv_context_env.vocabulary import ArchivedTurn


def turn(i: int) -> ArchivedTurn:
    """Turn i: user message 2i, its answer 2i+1; `zq<i>x` is a word only this turn has."""
    return ArchivedTurn(
        user_index=2 * i,
        assistant_index=2 * i + 1,
        user_text=f"question {i} about the zq{i}x record " + "padding " * 50,
        assistant_text=f"the answer to {i} is value{i} " + "detail " * 50,
    )


def main() -> None:
    db, episode, n, sleep_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    with TurnArchive(db, episode) as archive:
        for i in range(n):
            stored = archive.archive(turn(i), step=i)
            print(f"archived {2 * i} {stored}", flush=True)
            time.sleep(sleep_s)


if __name__ == "__main__":
    main()
