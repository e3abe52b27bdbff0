"""How long a plan's runs will take: the wall-time estimate of `igel-reproduce --dry-run`.

A job that takes its embeddings from an earlier job (task.reuse_embeddings: Sister Cities' k = 6 and 7 reuse k = 5's
training) costs REUSE_S. Any other job's seconds come from the first of these that knows its kind:
1. the store: the median duration of the FINISHED runs of its grid point (the same config, another seed);
2. the store: the FINISHED runs of its kind (the first entry of the cost model whose `match` it has), scaled by
   work: start_s + median((duration - start_s) / work) × the job's work;
3. the cost model, igel_exp/costs.yaml: start_s + per_unit_s × work, measured a thread per job on 2 cores.
In 1 and 2 only the runs timed on the hardware the job would run on here count (training.hardware of its
trainer.device, as its run will tag it), where the store has some: a cluster's nodes, a GPU box and a laptop time the
same run 2 to 10 times apart, and so does a shared machine whose host changed. Where it has none, all of them count,
and the estimate says so (their source ends in OTHER_HARDWARE).
A run's work is what its skip-gram trainer does: epochs × walks_per_node × walk_length × (2·window + negatives)
walk-position scores, times |V| where the config has it (dataset.num_nodes: generated graphs; a named dataset's
size is part of its kind); for the supervised trainer (PPI) its epochs, at most trainer.epochs and, as early
stopping ends it, EPOCHS_PAST_PATIENCE more than its patience (an assumption: when PPI's best epoch comes is not on
record); 1 for other runs. Durations are MLflow's (end − start of the run): they leave out the start of a process, which
igel-reproduce pays once per call, isolated jobs (scalability) once per job, which start_s then includes.

Recalibrate after the trainer gets faster or the machine changes: run tables into a store, then
`python scripts/calibrate_costs.py --tracking-uri URI` rewrites costs.yaml from the store's runs; meanwhile
the estimate of a store that has runs of a kind already follows them (steps 1 and 2).
"""

from __future__ import annotations

import functools
import importlib.resources
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from igel_exp.errors import ConfigError
from igel_exp.identity import NOT_IDENTITY, embedding_key
from igel_exp.plan import Job, matches
from igel_exp.reporting import StoredRun

COSTS = "costs.yaml"  # in the igel_exp package
WORK_KEYS = ("trainer.epochs", "trainer.walks_per_node", "trainer.walk_length", "trainer.window", "trainer.negatives")
EPOCHS_PAST_PATIENCE = 50  # a supervised run's best epoch, assumed: it then stops `patience` epochs later
REUSE_S = 5.0  # a run that reuses an earlier run's embeddings: load, cluster, score (median of 80 such runs: 5.0 s)
OTHER_HARDWARE = " (timed on other hardware, or before runs named theirs)"


@dataclass(frozen=True)
class Kind:
    """Runs whose config has every value of `match`, and what one costs: start_s + per_unit_s × work."""

    match: Mapping[str, Any]
    start_s: float
    per_unit_s: float


@dataclass(frozen=True)
class Duration:
    """A FINISHED run of the store: its flattened config (MLflow params, strings) and its wall time."""

    params: Mapping[str, str]
    seconds: float
    reused: bool = False  # it took its embeddings from another run: not a training's cost
    hardware: str = ""  # what it ran on (StoredRun.hardware; "" for runs made before igel-exp tagged it)


def finished_durations(runs: Iterable[StoredRun]) -> list[Duration]:
    """The durations of a store's FINISHED runs, those that reused another run's embeddings marked as such."""
    return [
        Duration(run.params, run.seconds, run.reused, run.hardware)
        for run in runs
        if run.status == "FINISHED" and run.seconds
    ]


@functools.cache
def device_hardware(device: str) -> str | None:
    """What a run with trainer.device=`device` would train on here (training.hardware, as its run tags it); None where
    this machine lacks that device (a sweep planned on a cluster's login node for its GPU nodes)."""
    from igel_exp.training import hardware, resolve_device  # here: igel-report, which never estimates, skips torch

    try:
        return hardware(resolve_device(device))
    except ConfigError:
        return None


def job_hardware(flat: Mapping[str, Any]) -> str | None:
    """What a job (its flattened config) would train on here."""
    return device_hardware(str(flat.get("trainer.device", "auto")))


def timed_here(timings: Sequence[tuple[str, float]], here: str | None) -> tuple[list[float], str]:
    """The values of (hardware, value) timings made on `here` where there are some, else all of them; and what to add
    to their source: nothing, or OTHER_HARDWARE."""
    same = [value for made_on, value in timings if here is not None and made_on == here]
    return (same, "") if same else ([value for _, value in timings], OTHER_HARDWARE)


@dataclass
class Estimate:
    """Seconds for some jobs, and how many of them each source estimated."""

    seconds: float = 0.0
    sources: Counter[str] = field(default_factory=Counter)

    def add(self, seconds: float, source: str, count: int = 1) -> None:
        self.seconds += seconds
        self.sources[source] += count

    def __iadd__(self, other: Estimate) -> Estimate:
        self.seconds += other.seconds
        self.sources.update(other.sources)
        return self


def load_kinds(text: str | None = None) -> list[Kind]:
    """The cost model: costs.yaml's kinds, in order (the first match wins)."""
    text = text if text is not None else importlib.resources.files("igel_exp").joinpath(COSTS).read_text()
    kinds = []
    for number, entry in enumerate((yaml.safe_load(text) or {}).get("kinds") or [], 1):
        try:
            kinds.append(Kind(dict(entry["match"]), float(entry["start_s"]), float(entry["per_unit_s"])))
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(f"{COSTS}: kind {number} needs match, start_s and per_unit_s ({error})") from None
    return kinds


def work(flat: Mapping[str, Any]) -> float:
    """Walk-position scores of a skip-gram run, epochs of a supervised one (see the module's docstring); 1 for any
    other run."""
    objective = str(flat.get("trainer.objective"))
    if objective == "supervised":
        try:
            return float(min(int(flat["trainer.epochs"]), int(flat["trainer.patience"]) + EPOCHS_PAST_PATIENCE))
        except (KeyError, TypeError, ValueError):
            return 1.0
    if objective != "skipgram":
        return 1.0
    try:
        epochs, walks, length, window, negatives = (float(flat[key]) for key in WORK_KEYS)
        nodes = float(flat.get("dataset.num_nodes") or 1)
    except (KeyError, TypeError, ValueError):
        return 1.0
    return epochs * walks * length * (2 * window + negatives) * nodes


def reuse_key(job: Job) -> str | None:
    """The embedding key of a job that takes the embeddings of an earlier run trained alike (task.reuse_embeddings),
    None for a job that always trains."""
    return embedding_key(job.config) if job.flat.get("task.reuse_embeddings") else None


def point_signature(flat: Mapping[str, Any]) -> frozenset:
    """A grid point as text: the identity keys but the seed, with the values as MLflow logs them."""

    def counts(key: str) -> bool:
        return key != "seed" and not any(key == skip or key.startswith(f"{skip}.") for skip in NOT_IDENTITY)

    return frozenset((key, str(value)) for key, value in flat.items() if counts(key))


class Estimator:
    """Seconds per job from the store's finished runs (`durations`), else from the cost model (`kinds`); `hardware`
    tells what a job (its flattened config) would run on, whose runs are preferred."""

    def __init__(
        self,
        durations: Iterable[Duration],
        kinds: Sequence[Kind],
        hardware: Callable[[Mapping[str, Any]], str | None] = job_hardware,
    ):
        self.kinds, self.hardware = list(kinds), hardware
        self.by_point: dict[frozenset, list[tuple[str, float]]] = {}  # (hardware, seconds) of each run of a point
        self.rates: dict[int, list[tuple[str, float]]] = {}  # kind index -> (hardware, seconds per unit of work)
        for run in durations:
            self.by_point.setdefault(point_signature(run.params), []).append((run.hardware, run.seconds))
            index = None if run.reused else self._kind(run.params)
            if index is not None:
                kind = self.kinds[index]
                rate = max(run.seconds - kind.start_s, 0.0) / work(run.params)
                self.rates.setdefault(index, []).append((run.hardware, rate))

    def _kind(self, flat: Mapping[str, Any]) -> int | None:
        return next((index for index, kind in enumerate(self.kinds) if matches(flat, kind.match)), None)

    def job(self, job: Job) -> tuple[float | None, str]:
        """The job's seconds and where they come from: store (point), store (kind), cost model, or none."""
        here = self.hardware(job.flat)
        same_point = self.by_point.get(point_signature(job.flat))
        if same_point:
            seconds, where = timed_here(same_point, here)
            return statistics.median(seconds), f"the store's runs of the same grid point{where}"
        index = self._kind(job.flat)
        if index is None:
            return None, "no estimate (a kind the cost model lacks)"
        kind = self.kinds[index]
        if index in self.rates:
            rates, where = timed_here(self.rates[index], here)
            return kind.start_s + statistics.median(rates) * work(job.flat), f"the store's runs of its kind{where}"
        return kind.start_s + kind.per_unit_s * work(job.flat), f"the cost model ({COSTS})"

    def jobs(self, jobs: Iterable[Job], extra: int = 0, trained: set[str] | None = None) -> Estimate:
        """The jobs' total, plus `extra` runs costed as the mean of these jobs (confirmations not chosen yet).
        `trained`: the embedding keys of the jobs before these (updated), whose embeddings later jobs reuse."""
        estimate, known = Estimate(), []
        trained = set() if trained is None else trained
        for job in jobs:
            key = reuse_key(job)
            if key is not None and key in trained:
                seconds, source = REUSE_S, "the reuse of an earlier job's embeddings"
            else:
                seconds, source = self.job(job)
            if key is not None:
                trained.add(key)
            estimate.add(seconds or 0.0, source)
            if seconds is not None:
                known.append(seconds)
        if extra:
            estimate.add(extra * (statistics.mean(known) if known else 0.0), "the mean of the selection runs", extra)
        return estimate


def duration_text(seconds: float) -> str:
    """1 h 05 min, 12 min, 40 s."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"
