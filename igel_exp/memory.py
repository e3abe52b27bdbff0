"""Process memory: the resident set now, its peak over a stretch of code, and a budget that stops a run.

Peaks come from the kernel's high-water mark of the resident set (VmHWM in /proc/self/status). On Linux
≥ 4.0 writing "5" to /proc/self/clear_refs resets that mark, so the peak of each stage is its own. Where
that is not possible (other systems, a read-only /proc) the peak of a stage falls back to the peak of the
process so far (getrusage's ru_maxrss): an upper bound, exact only for the stage that set the record.
Note that the reset also resets ru_maxrss, so the process-wide peak must be tracked by whoever resets.

The budget is enforced twice: a stage's estimated need is checked before the stage runs (`check`), and a
watchdog thread samples the resident set while the run goes on (`watch`) and interrupts the main thread
with a BudgetError when it passes the budget, long before the kernel's OOM killer would act. The error
surfaces when the main thread next runs Python code, so one long C call can overshoot by what it
allocates: the estimates guard against that.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from igel_exp.errors import BudgetError

log = logging.getLogger(__name__)

MIB = 1 << 20
_STATUS = Path("/proc/self/status")
_STATM = Path("/proc/self/statm")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_RESET_HIGH_WATER_MARK = "5"  # clear_refs command: reset the peak resident set size (Linux >= 4.0)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _ru_maxrss_mib() -> float:
    # kilobytes on Linux, bytes on macOS
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / MIB


def rss_mib() -> float:
    """Resident set size of this process now, MiB (the peak so far where /proc is missing)."""
    try:
        return int(_STATM.read_text().split()[1]) * _PAGE / MIB
    except (OSError, IndexError, ValueError):
        return _ru_maxrss_mib()


class PeakMeter:
    """Peak resident set of this process since the last `reset`, MiB.

    `exact` says whether resets work; without them `peak_mib` is the peak of the whole process so far.
    """

    def __init__(self):
        self.exact = self._high_water_mark() is not None and self._try_reset()

    def reset(self) -> None:
        if self.exact:
            self._try_reset()

    def peak_mib(self) -> float:
        mark = self._high_water_mark() if self.exact else None
        return mark if mark is not None else _ru_maxrss_mib()

    @staticmethod
    def _high_water_mark() -> float | None:
        try:
            for line in _STATUS.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / MIB
        except (OSError, ValueError, IndexError):
            pass
        return None

    @staticmethod
    def _try_reset() -> bool:
        try:
            with open(_CLEAR_REFS, "w") as handle:
                handle.write(_RESET_HIGH_WATER_MARK)
            return True
        except OSError:
            return False


class MemoryBudget:
    """A ceiling on this process's resident memory, named by the config key that sets it.

    `limit_mib` None disables every check. Estimates are checked with `check`; `watch` samples the
    resident set every `interval_s` seconds in a daemon thread.
    """

    def __init__(self, limit_mib: float | None, key: str, interval_s: float = 0.05):
        self.limit_mib = None if limit_mib is None else float(limit_mib)
        self.key = key
        self.interval_s = interval_s
        self.stage = "setup"  # what the run is doing, for the message
        self.exceeded: BudgetError | None = None
        self._raised = False
        self.peak_seen_mib = 0.0

    def _limit(self) -> str:
        return f"the memory budget {self.key} ({self.limit_mib / 1024:.2f} GiB)"

    def check(self, stage: str, estimate_mib: float, detail: str = "") -> None:
        """Stop before `stage` when its estimated peak (resident MiB, the process's base included) is over."""
        if self.limit_mib is not None and estimate_mib > self.limit_mib:
            hint = f"; {detail}" if detail else ""
            raise BudgetError(
                f"stage {stage!r} would need about {estimate_mib / 1024:.2f} GiB, over {self._limit()}{hint}"
            )

    def raise_if_exceeded(self) -> None:
        """Raise the watchdog's error if it has not been raised yet (it could not interrupt the main thread)."""
        if self.exceeded is not None and not self._raised:
            self._raised = True
            raise self.exceeded

    @contextmanager
    def watch(self) -> Iterator[MemoryBudget]:
        """Sample the resident set while the block runs; past the limit, raise BudgetError in the block."""
        if self.limit_mib is None:
            yield self
            return
        rss = rss_mib()
        if rss > self.limit_mib:
            raise BudgetError(f"the process already holds {rss / 1024:.2f} GiB, over {self._limit()}")
        main = threading.main_thread()
        interrupt = threading.current_thread() is main
        if interrupt:
            # a signal of our own makes the main thread raise even while it waits on a lock or a pool
            previous = signal.signal(signal.SIGUSR1, self._on_signal)
        stop = threading.Event()
        sampler = threading.Thread(target=self._sample, args=(stop, main.ident if interrupt else None), daemon=True)
        sampler.start()
        try:
            yield self
        except BudgetError:
            raise
        except Exception as error:
            # raised inside a library that wrapped it (MLflow's store does): surface the budget, not the wrapper
            if self.exceeded is not None:
                raise self.exceeded from error
            raise
        finally:
            stop.set()
            sampler.join()
            if interrupt:
                signal.signal(signal.SIGUSR1, previous)

    def _sample(self, stop: threading.Event, main_ident: int | None) -> None:
        while not stop.wait(self.interval_s):
            rss = rss_mib()
            self.peak_seen_mib = max(self.peak_seen_mib, rss)
            if rss > self.limit_mib:
                self.exceeded = BudgetError(
                    f"stage {self.stage!r} reached {rss / 1024:.2f} GiB resident, over {self._limit()}: stopped"
                )
                log.error("%s", self.exceeded)
                if main_ident is not None:
                    signal.pthread_kill(main_ident, signal.SIGUSR1)
                return

    def _on_signal(self, signum, frame) -> None:
        if self.exceeded is not None and not self._raised:
            self._raised = True  # once: the cleanup that follows runs Python code too
            raise self.exceeded
