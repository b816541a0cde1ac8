"""Helpers shared by the CPU backend's tests."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_in_threads(work: Callable[[], None], count: int) -> list[BaseException]:
    """Runs ``work()`` on ``count`` threads at once; returns the exceptions they raised."""
    errors: list[BaseException] = []

    def guarded():
        try:
            work()
        except Exception as e:  # noqa: BLE001 - the caller asserts on them
            errors.append(e)

    threads = [threading.Thread(target=guarded) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
