"""The trainer: device, seeds, epochs, batches, progress bar and per-epoch metrics. Models own the maths."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import itertools
import logging
import math
import os
import platform
import random
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import threadpoolctl
import torch
from tqdm.auto import tqdm

from igel_exp.errors import ConfigError, IgelError, first_line
from igel_exp.models import (
    FreeEmbedding,
    GatheredNegatives,
    HotRows,
    IGELEmbedding,
    Lookup,
    RowPairs,
    TableNegatives,
    feature_walk_gradients,
    multilabel_loss,
    walk_skipgram_gradients,
)
from igel_exp.walks import END, AuthorsPairs, drawn_ahead, positive_pairs

log = logging.getLogger(__name__)

EpochCallback = Callable[[int, dict[str, float]], None]


def resolve_device(name: str = "auto") -> torch.device:
    """'auto' picks CUDA when available, else CPU; anything else is passed to torch.device."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise ConfigError(f"trainer.device={name!r} is not a torch device ({error})") from None
    backend = getattr(torch, device.type, None)  # torch.cuda, torch.mps, torch.xpu: each says whether it is here
    if device.type != "cpu" and not (hasattr(backend, "is_available") and backend.is_available()):
        raise ConfigError(f"trainer.device={name!r} but {device.type} is not available on this machine (or this torch)")
    count = backend.device_count() if hasattr(backend, "device_count") else None
    if device.index is not None and count is not None and device.index >= count:
        raise ConfigError(f"trainer.device={name!r} but this machine has {count} {device.type} devices")
    return device


def hardware(device: torch.device | None = None) -> str:
    """What `device` (the CPU by default) is: the GPU's name, or the CPU's model with its widest vector instructions,
    its family and model numbers (x86 Linux) and its cores. A shared machine's host can change from one day to the
    next (this project's 2-core machine has been an AVX-512 EPYC and a first-generation one, family 23 model 1, whose
    128-bit FMA units run float32 products at 31 GFLOP/s a core against 75-85: 2.4 times slower on the same runs):
    timings compare only between runs on the same hardware."""
    device = device or torch.device("cpu")
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type != "cpu":
        return device.type
    try:  # a virtual machine's model name may hide the generation ("AMD EPYC"): its family and model tell it
        fields = dict(line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines())
        fields = {key.strip(): value.strip() for key, value in fields.items()}
    except (OSError, ValueError):  # not Linux
        fields = {}
    model = fields.get("model name") or platform.processor() or platform.machine() or "CPU"
    family = (
        f", family {fields['cpu family']} model {fields['model']}" if {"cpu family", "model"} <= fields.keys() else ""
    )
    return f"{model} ({torch.backends.cpu.get_cpu_capability()}{family}, {os.cpu_count()} cores)"


def emulated_bfloat16(device: torch.device) -> bool:
    """Whether bfloat16 products run emulated on `device`: an x86 CPU without oneDNN's bfloat16 kernels (AVX-512 and
    newer), where they take some 17 times as long as float32's (Facebook's 4,039 × 364 by 364 × 256: 413 against 24
    ms, one thread of an AVX2 EPYC). Unknown elsewhere (Arm CPUs, GPUs): False."""
    if device.type != "cpu" or platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    return not torch.ops.mkldnn._is_mkldnn_bf16_supported()


def seed_everything(seed: int, deterministic: bool = True) -> None:
    """Seed every generator; `deterministic` also makes torch pick reproducible kernels (bit-identical reruns;
    without it threaded CPU reductions differ in the last bits from run to run)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # required by deterministic cuBLAS
    use_deterministic_algorithms(deterministic)


def set_threads(threads: int | None) -> None:
    """torch's CPU threads (the `threads` key; None: torch's default, one per core), at most this machine's CPUs: more
    only contend for them, and some tens of thousands made OpenMP fail with a MemoryError. numpy's, scipy's and
    scikit-learn's BLAS and OpenMP pools too (the evaluators' logistic regressions, k-means): left at one thread per
    core, the jobs of a parallel sweep at threads=1 contended for the cores, and an AUC's fifth digit followed the
    machine's core count."""
    if not threads:
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if threads > cpus:
        log.warning("threads=%d is more than this machine's %d CPUs: using %d", threads, cpus, cpus)
    torch.set_num_threads(min(threads, cpus))
    threadpoolctl.threadpool_limits(min(threads, cpus))  # kept until the process ends


def use_deterministic_algorithms(mode: bool) -> None:
    """torch.use_deterministic_algorithms(mode, warn_only=True) without importing torch._inductor, whose flag it also
    sets: that import (torch._dynamo with it) took 1.2 s of every run's start, and nothing here compiles. Where the
    compiler is loaded, or torch lacks the eager setter, the public function sets both."""
    eager = getattr(torch._C, "_set_deterministic_algorithms", None)
    if eager is None or "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=True)
    else:
        eager(mode, warn_only=True)
    # Deterministic mode also fills every new uninitialised tensor with NaN, a guard against kernels that read memory
    # they did not write. None of ours does (a run's bits are the same without it), and the fills were 7 % of a
    # Facebook step: the band products' padded blocks, the authors' Gram matrices, ... (some 20 MB a step).
    torch.utils.deterministic.fill_uninitialized_memory = False


@functools.cache
def keep_freed_memory() -> None:
    """Have glibc's malloc keep the memory a training step frees for the next step (once per process, Linux only).

    A step allocates and frees the same tensors of a few MB. By default glibc hands freed memory at the top of its
    heap back to the system, and the next step faults it in again page by page: whether it does depends on what
    the process allocated before, and when it did a Facebook epoch took 280,000 page faults and 40 % longer
    (scripts/bench_link_prediction.py). Up to 256 MiB stay free, within the peak a step reached anyway. Setting that
    threshold also freezes glibc's mmap threshold where it stands (128 KiB in a fresh process), so that every larger
    array was mapped and faulted in anew: it is raised to 256 MiB too (the authors' batches, trainer.batching=buckets,
    took 10 million page faults and 3× longer an epoch of Sister Cities without it).
    """
    library = ctypes.util.find_library("c")
    libc = ctypes.CDLL(library) if library else None
    if libc is None or not hasattr(libc, "mallopt"):  # macOS, Windows: not glibc
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 256 << 20)
    libc.mallopt(m_trim_threshold, 256 << 20)


LOGIT_INITS = ("fixed", "uniform")
BATCHINGS = ("walks", "buckets")
BUCKETS_NEED_UNIFORM_NOISE = (
    "trainer.batching=buckets draws its negatives uniformly, as the authors did: trainer.noise=uniform"
)


MIN_STEPS = 1000  # Adam steps that a larger batch (batch_scale) never takes a run below


def batch_scale_for(most: int, steps: int) -> int:
    """The batch scale a run of `steps` Adam steps at the authors' batches takes, at most `most`: as large as keeps it
    MIN_STEPS steps. Fewer steps undertrain: Facebook's link prediction kept its AUC within 0.002 at 920 steps
    (κ = 4) and lost 0.02 at 230 (κ = 16); the Les Misérables clustering, 770 steps at κ = 1, lost 0.07 of modularity
    at κ = 4 (docs/experiments.md)."""
    return max(1, min(most, steps // MIN_STEPS))


def walks_per_batch(batch_size: int, walk_length: int, window: int, negatives: int) -> int:
    """Whole walks in a batch of `batch_size` training pairs, counted as the authors did (a positive pair and its
    negatives count 1 + negatives)."""
    pairs_per_walk = positive_pairs(walk_length, window) * (1 + negatives)
    return max(1, round(batch_size / max(pairs_per_walk, 1)))


COMPILE_FROM_STEPS = 50_000  # Adam steps from which trainer.compile=auto compiles the step
DIVERGED = 100  # a last epoch's loss this many times chance's is a diverged training (SkipGramTrainer._refuse_garbage)
STEPS_PER_CALL = 8  # consecutive steps of one batch shape a compiled call runs, Adam's updates included


def compiles(setting: bool | str, steps: int, device: torch.device) -> bool:
    """Whether a run of `steps` Adam steps compiles its step (trainer.compile): true and false as set; `auto` where it
    pays, on the CPU with a C++ compiler at hand and at least COMPILE_FROM_STEPS steps. Compiling costs about a minute
    the first time on a machine (~10 s from Inductor's cache) and saves over 1 ms a step of the scalability runs'
    batches: at 2^20 nodes (350,000 steps) it trains about twice as fast, at the paper's sizes (up to 2^14 nodes, 5,500
    steps) it would cost more than it saves."""
    if setting != "auto":
        return bool(setting)
    return device.type == "cpu" and steps >= COMPILE_FROM_STEPS and cpp_compiler() is not None


def cpp_compiler() -> str | None:
    """The C++ compiler Inductor calls on the CPU ($CXX, else g++; clang++ on macOS), if this machine has it."""
    return shutil.which(os.environ.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++"))


class SkipGramTrainer:
    """Minimises the negative-sampling loss of random walks with Adam, a batch of whole walks at a time.

    Positive pairs are the nodes at most `window` steps apart in a walk (both orders); every walk position
    draws z negatives from `noise` (a distribution over nodes, uniform when None), shared by the positive pairs
    whose target it is. `batch_size` counts training pairs as the authors did — a positive pair and its z
    negatives count 1 + z — and is rounded to whole walks. With `logit_affine` a pair's probability is
    σ(a · e_t·e_o + b) with a learned scale a and bias b, as in the authors' model: without a bias, embeddings
    that are averages of shared rows of W (IGEL's) cannot give dissimilar pairs a negative logit. `logit_init`
    starts them at a = 1, b = 0 (`fixed`) or, as the authors' nn.Linear(1, 1) did, uniform in [-1, 1) (`uniform`,
    drawn from torch's seeded generator).

    `batch_scale` = κ trains on κ times larger batches, κ times fewer steps at the same learning rate: what fills a
    GPU (a step's fixed costs, embedding the whole graph among them, are paid κ times less often). κ = 1 keeps the
    authors' batches, which reproduce the paper; `batch_scale_for` is the rule that caps κ where a run would take too
    few steps. (Adam's square-root rule, lr × √κ, diverged: Facebook's AUC fell to 0.82 at κ = 4.)

    `batching=buckets` re-enacts the authors' batches instead (walks.AuthorsPairs: every positive pair with its own
    negatives, pairs dealt round-robin into 777 buckets, a full bucket a batch, the mean binary cross-entropy of its
    pairs the loss; an IGEL model scores them as pairs of distinct feature rows, IGELEmbedding.by_distinct_rows);
    `walks`, the default, is the paper's loss over whole walks.

    A step reads nothing back to the host: its loss is summed on the device and read once per epoch (and at
    most once a second for the progress bar). On a GPU each batch shape's step is captured once in a CUDA graph
    (`cuda_graphs`) and replayed, so that its ~40 kernels cost one launch. On the CPU, `compiled` has torch.compile
    turn STEPS_PER_CALL steps of an IGEL model whose negatives stay rows of X (Erdős–Rényi graphs at scale: ~80
    operations on tiny tensors a step, each paying its dispatch), Adam's updates included, into one call of fused C++
    (CompiledStep, feature_walk_steps); equal up to float rounding.
    """

    def __init__(
        self,
        epochs: int,
        batch_size: int,
        lr: float,
        negatives: int,
        window: int,
        device: torch.device,
        seed: int,
        noise: np.ndarray | None = None,
        logit_affine: bool = True,
        progress: bool = True,
        logit_init: str = "fixed",
        batch_scale: int = 1,
        cuda_graphs: bool = True,
        batching: str = "walks",
        compiled: bool = False,
        section: str = "trainer",
    ):
        """`section`: the config section the settings come from, which the errors name (PPI's trainer.pretrain)."""
        for key, value in [
            ("epochs", epochs),
            ("batch_size", batch_size),
            ("negatives", negatives),
            ("window", window),
            ("batch_scale", batch_scale),
        ]:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{section}.{key} must be a positive integer, got {value!r}")
        if lr <= 0:
            raise ConfigError(f"{section}.lr must be positive, got {lr!r}")
        if logit_init not in LOGIT_INITS:
            raise ConfigError(f"{section}.logit_init={logit_init!r} is not one of {', '.join(LOGIT_INITS)}")
        if batching not in BATCHINGS:
            raise ConfigError(f"{section}.batching={batching!r} is not one of {', '.join(BATCHINGS)}")
        if batching == "buckets" and noise is not None:
            raise ConfigError(BUCKETS_NEED_UNIFORM_NOISE)
        self.section = section
        self.epochs = epochs
        self.batch_size = batch_size * batch_scale
        self.lr = lr
        self.negatives = negatives
        self.window = window
        self.device = device
        self.seed = seed
        self.noise = None if noise is None else torch.as_tensor(np.cumsum(noise / noise.sum()), device=device)
        self.logit_affine = logit_affine
        self.logit_init = logit_init
        self.progress = progress
        self.cuda_graphs = cuda_graphs and device.type == "cuda"
        self.batching = batching
        self.compiled = compiled and device.type == "cpu"
        if compiled and not self.compiled:
            log.info("trainer.compile: the step is compiled on the CPU only; on %s it runs as before", device)
        self.affine: torch.Tensor | None = None  # the learned (scale, bias) after fit, None without logit_affine
        # after fit: each asked-for setting that did not apply (trainer.compile, trainer.cuda_graphs) and why, which
        # the run logs as tags: a run's record says how it really ran, not only what its config asked
        self.fallbacks: dict[str, str] = {}

    def walks_per_batch(self, walk_length: int) -> int:
        return walks_per_batch(self.batch_size, walk_length, self.window, self.negatives)

    def fit(
        self,
        model: IGELEmbedding | FreeEmbedding,
        epoch_walks: Callable[[np.random.Generator], Iterable[np.ndarray | torch.Tensor]],
        on_epoch: EpochCallback | None = None,
        walks_per_epoch: int | None = None,
    ) -> list[float]:
        """Train `model` in place; `epoch_walks(rng)` yields the walk matrices (walks × length) of an epoch, as
        numpy arrays or tensors (drawn on the device); `walks_per_epoch`, when known, sizes the progress bar."""
        keep_freed_memory()
        model.to(self.device).train()
        scored, rows = model, None
        if self.batching == "buckets" and isinstance(model, IGELEmbedding):  # pairs scored as pairs of feature rows
            scored, rows = model.by_distinct_rows()
        history: list[float] = []
        with scored.over_columns_in_use() if isinstance(scored, IGELEmbedding) else nullcontext(scored) as trained:
            step = _SkipGramStep(self, trained)
            if self.batching == "buckets":
                batches, take = functools.partial(self._buckets, step=step, rows=rows), step.take_pairs
            else:
                batches, take = step.prepared, step.take
            rng = np.random.default_rng(self.seed)
            for epoch in range(1, self.epochs + 1):
                step.start_epoch()
                # closed however the epoch ends: an error's line must not be written on the end of an open bar
                with tqdm(
                    desc=f"epoch {epoch}/{self.epochs}", total=walks_per_epoch, unit="walk", disable=not self.progress
                ) as bar:
                    shown = time.monotonic()
                    for work, walks in batches(epoch_walks(rng), model.n_nodes, rng):
                        take(work)
                        bar.update(walks)
                        if self.progress and time.monotonic() - shown > 1.0:  # a host read once a second, not per step
                            bar.set_postfix(loss=f"{step.mean_loss():.4f}", refresh=False)
                            shown = time.monotonic()
                loss, pairs = step.mean_loss(), step.pairs()
                if pairs == 0:
                    raise ConfigError("the walks produced no skip-gram pairs: the graph has no edges")
                if not math.isfinite(loss):  # W is no embedding any more: stop here, not in the task's NaN error
                    raise ConfigError(
                        f"training diverged in epoch {epoch} (loss {loss}): lower {self.section}.lr={self.lr:g}"
                    )
                history.append(loss)
                log.info("epoch %d/%d: loss %.5f over %d positive pairs", epoch, self.epochs, loss, pairs)
                if on_epoch is not None:
                    on_epoch(epoch, {"loss": loss, "positive_pairs": float(pairs)})
            self._refuse_garbage(history[-1])
        self.affine = step.affine.detach().clone() if self.logit_affine else None  # for the saved model
        self.fallbacks = step.fallbacks()
        model.eval()
        return history

    def _refuse_garbage(self, loss: float) -> None:
        """A ConfigError where the last epoch's loss is DIVERGED times what embeddings that know nothing would score
        ((1 + z) ln 2 a positive pair at most, each logit 0): a learning rate far too high (trainer.lr=1000 ended at
        7,854 on Les Misérables, its modularity 0.01) leaves a finite loss and embeddings of no use, which a FINISHED
        run would put among a table's seeds. Trained runs end near or below that mark (2.6 to 3.3 on Les Misérables,
        lr 0.01 to 10); an epoch before the last may spike and recover."""
        chance = (1 + self.negatives) * math.log(2)
        if loss > DIVERGED * chance:
            raise ConfigError(
                f"training diverged: the last epoch's loss, {loss:.4g}, is over {DIVERGED} times what embeddings that"
                f" know nothing score ({chance:.3g}): lower {self.section}.lr={self.lr:g}"
            )

    def _batches(self, walks: np.ndarray | torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor | None]]:
        """A chunk's batches of whole walks on the device, each with its validity mask where one of its walks ended
        early (it started at an isolated node): which batches those are is read once per chunk, not per batch."""
        walks = torch.as_tensor(walks).to(self.device)
        size = self.walks_per_batch(walks.shape[1])
        ended = (walks[:, -1] == END).tolist()
        for start, batch in zip(range(0, len(walks), size), torch.split(walks, size), strict=True):
            yield batch, (batch != END) if any(ended[start : start + size]) else None

    def _buckets(
        self,
        chunks: Iterable[np.ndarray | torch.Tensor],
        n_nodes: int,
        rng: np.random.Generator,
        step: _SkipGramStep,
        rows: np.ndarray | None = None,
    ) -> Iterator[tuple[tuple[torch.Tensor, ...], float]]:
        """The authors' batches of the epoch's walks (walks.AuthorsPairs) on the device, as `step` takes them
        (_SkipGramStep.pair_batches), each node replaced by its row of `rows` where given, with each batch its share of
        the walks (a batch mixes pairs of many)."""
        walks = np.concatenate([torch.as_tensor(chunk).cpu().numpy() for chunk in chunks])
        pairs = AuthorsPairs.of_walks(walks, self.window, self.negatives, n_nodes, rng, labels=rows)
        n_batches = pairs.n_batches(self.batch_size)
        for number, batch in enumerate(step.pair_batches(pairs)):
            share = (number + 1) * len(walks) // n_batches - number * len(walks) // n_batches  # whole walks, all in all
            yield batch, share

    def sample_negatives(self, n_nodes: int, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        if self.noise is None:
            return torch.randint(n_nodes, shape, generator=generator, device=self.device)
        uniform = torch.rand(shape, generator=generator, device=self.device, dtype=self.noise.dtype)
        return torch.searchsorted(self.noise, uniform).clamp_(max=n_nodes - 1)


def _positions(walks: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    """The ids a batch of walks embeds: END (−1), where a walk ended early, reads node 0, weighted 0 by `valid`."""
    return walks if valid is None else walks.clamp(min=0)


@dataclass
class _WalkBatch:
    """A batch of walks as a step takes it (_SkipGramStep.prepared): the walks (w × s ids), their validity mask where
    one ended early, the negatives drawn for them (w × s × z) and, where gathered beforehand, the feature rows of the
    positions and of the negatives."""

    walks: torch.Tensor
    valid: torch.Tensor | None
    negatives: torch.Tensor
    rows: tuple[torch.Tensor, torch.Tensor] | None
    steps = 1


@dataclass
class _CompiledCall:
    """STEPS_PER_CALL consecutive batches of one shape that one compiled call trains on (feature_walk_steps): the
    feature rows of their positions and of their negatives, stacked."""

    rows: tuple[torch.Tensor, torch.Tensor]

    @property
    def steps(self) -> int:
        return len(self.rows[0])


class _CellBatch(NamedTuple):
    """An authors' batch as its pairs and positive pairs per cell of the table's Gram matrix (rows², float counts), with
    the number of each (_SkipGramStep.pair_batches)."""

    count: torch.Tensor
    positives: torch.Tensor
    pairs: int
    n_positives: int


class _SkipGramStep:
    """One optimisation step of a batch of walks, its loss and pair count summed on the device.

    The negatives are drawn eagerly (the generator stays the trainer's); the rest — embedding, loss, gradients
    and Adam's update — reads and writes fixed buffers, so that on a GPU it is captured once per batch shape
    and replayed (after two eager warm-up steps on a side stream, as CUDA graphs need).
    """

    WARMUP = 2

    def __init__(self, trainer: SkipGramTrainer, model: IGELEmbedding | FreeEmbedding):
        self.trainer, self.model = trainer, model
        device = trainer.device
        # without logit_affine the logit is the plain dot product: scale 1, bias 0, whatever logit_init says
        drawn = trainer.logit_affine and trainer.logit_init == "uniform"
        start = torch.rand(2) * 2 - 1 if drawn else torch.tensor([1.0, 0.0])
        self.affine = start.to(device)  # the logit's scale and bias
        self.optimiser = _FusedAdam([model.weight, self.affine] if trainer.logit_affine else [model.weight], trainer.lr)
        self.generator = torch.Generator(device=device).manual_seed(trainer.seed)
        exact = torch.float32 if device.type == "mps" else torch.float64  # an epoch sums ~10⁸ pairs' losses
        self.loss_sum = torch.zeros((), device=device, dtype=exact)
        self.pair_sum = torch.zeros((), device=device, dtype=exact)
        self.graphs: dict[tuple, _CapturedStep | int | None] = {}  # per shape: warm-ups done, captured, or eager
        self.capture_failure: str | None = None  # why a batch shape's step runs eagerly on a GPU, the first one's
        self.compiled_steps = CompiledStep(feature_walk_steps) if trainer.compiled else None
        self.queued: list[tuple[torch.Tensor, torch.Tensor]] = []  # (walks, negatives) of steps for a compiled call
        # whether steps are prepared on another thread (`prepared`): on the CPU, where the walks are drawn too
        self.ahead = device.type == "cpu"
        self.hot: HotRows | None = None  # the authors' batches' hot rows (models.RowPairs), once counted
        self.hot_counted = False

    def start_epoch(self) -> None:
        self.loss_sum.zero_()
        self.pair_sum.zero_()

    def mean_loss(self) -> float:
        return float(self.loss_sum / self.pair_sum.clamp(min=1))

    def pairs(self) -> int:
        return int(self.pair_sum)

    def fallbacks(self) -> dict[str, str]:
        """trainer.compile and trainer.cuda_graphs where asked for and not applied (for some batch shape), and why."""
        why = {
            "trainer.compile": self.compiled_steps and (self.compiled_steps.failure or self.compiled_steps.unused()),
            "trainer.cuda_graphs": self.capture_failure,
        }
        return {key: reason for key, reason in why.items() if reason is not None}

    def prepared(
        self, chunks: Iterable[np.ndarray | torch.Tensor], n_nodes: int, rng: np.random.Generator
    ) -> Iterator[tuple[list[_WalkBatch | _CompiledCall], int]]:
        """The epoch's steps, a few at a time (at least STEPS_PER_CALL where the chunk holds them), with the walks
        they took from their chunk. Each batch of walks draws its negatives (from the step's generator, in the batches'
        order) and, on the CPU, gets its feature rows where the model embeds them from X (`_batch`); runs of
        STEPS_PER_CALL batches that a compiled call takes are stacked into one (`_CompiledCall`). On the CPU a chunk's
        steps are prepared on another thread while the ones before train (walks.drawn_ahead): at 2^20 nodes the
        gathers of X's rows (327 MB, no cache holds it) were a fifth to a quarter of a compiled step. The chunks are
        read here, on the caller's thread, which times its waits for walks."""
        for chunk in chunks:
            steps = self._chunk_steps(chunk)
            yield from drawn_ahead(steps) if self.ahead else steps
        yield self._unqueued(), 0  # the epoch's last steps

    def _unqueued(self) -> list[_WalkBatch]:
        """The steps queued for a compiled call, as batches to run one by one (fewer than a call takes)."""
        batches = [self._batch(walks, None, negatives) for walks, negatives in self.queued]
        self.queued.clear()
        return batches

    def _chunk_steps(self, chunk: np.ndarray | torch.Tensor) -> Iterator[tuple[list[_WalkBatch | _CompiledCall], int]]:
        """A chunk's steps (`prepared`); a run of steps for a compiled call may go on into the next chunk (`queued`)."""
        trainer, model = self.trainer, self.model
        ready: list[_WalkBatch | _CompiledCall] = []
        walks_done = 0
        for walks, valid in trainer._batches(chunk):
            negatives = trainer.sample_negatives(model.n_nodes, (*walks.shape, trainer.negatives), self.generator)
            features = model.negatives_as_features(walks.numel() + negatives.numel())
            if self.compiled_steps is not None and valid is None and features:
                if self.queued and self.queued[0][0].shape != walks.shape:  # a batch of another shape: a chunk's last
                    ready += self._unqueued()
                self.queued.append((walks, negatives))
                if len(self.queued) == STEPS_PER_CALL:
                    stacked = [torch.stack(parts) for parts in zip(*self.queued, strict=True)]
                    ready.append(_CompiledCall(self._rows(*stacked)))
                    self.queued.clear()
            else:  # the queued steps come first
                ready += self._unqueued()
                ready.append(self._batch(walks, valid, negatives))
            walks_done += len(walks)
            if sum(item.steps for item in ready) >= STEPS_PER_CALL:
                yield ready, walks_done
                ready, walks_done = [], 0
        yield ready, walks_done

    def _batch(self, walks: torch.Tensor, valid: torch.Tensor | None, negatives: torch.Tensor) -> _WalkBatch:
        """A batch with its negatives and, on the CPU where the model embeds them from X's rows, those rows."""
        positions = _positions(walks, valid)
        features = self.ahead and self.model.negatives_as_features(walks.numel() + negatives.numel())
        return _WalkBatch(walks, valid, negatives, self._rows(positions, negatives) if features else None)

    def _rows(self, positions: torch.Tensor, negatives: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """X's rows of a step's positions and of its negatives: what models.feature_walk_gradients takes."""
        return self.model.feature_rows(positions), self.model.feature_rows(negatives)

    def take(self, work: list[_WalkBatch | _CompiledCall]) -> None:
        """Run prepared steps (`prepared`) in order."""
        for item in work:
            if isinstance(item, _CompiledCall):
                trainer = self.trainer
                loss, pairs = self.compiled_steps(self.model, *item.rows, trainer.window, self.affine, self.optimiser)
                self.loss_sum += loss
                self.pair_sum += pairs
            else:
                self._take_batch(item)

    def _take_batch(self, batch: _WalkBatch) -> None:
        """One step, eagerly or, on a GPU, as a CUDA graph of its batch shape (after WARMUP eager ones)."""
        walks, valid, negatives = batch.walks, batch.valid, batch.negatives
        key = (*walks.shape, valid is None)
        state = self.graphs.get(key, 0) if self.trainer.cuda_graphs else None
        if isinstance(state, _CapturedStep):
            state.replay(walks, valid, negatives)
        elif state is None:  # not on a GPU, or its capture failed: eager
            self.compute(walks, valid, negatives, batch.rows)
        elif state < self.WARMUP:
            self.graphs[key] = state + 1
            self._warm_up(walks, valid, negatives)
        else:
            self.graphs[key] = _CapturedStep.capture(self, walks, valid, negatives)

    def pair_batches(self, pairs: AuthorsPairs) -> Iterator[_CellBatch | tuple[torch.Tensor, ...]]:
        """An epoch's authors' batches on the device as `take_pairs` takes them. Where every one would be scored from
        the Gram matrix of the whole table (RowPairs.by_gram; Les Misérables' 38 distinct rows), each is its pairs and
        positive pairs per cell of it (AuthorsPairs.by_cell), its pairs' number and its positives': the sums a step
        would count of its dealt pairs, without a lookup of their ids (Les Misérables' epoch: 6.6 M pairs counted in
        some 30 ms, where dealing them took 70 ms); otherwise its (targets, others, labels), dealt."""
        trainer, rows = self.trainer, self.model.n_nodes
        fewest = pairs.others.size - (pairs.n_batches(trainer.batch_size) - 1) * trainer.batch_size  # the last batch's
        if (self.hot_counted and self.hot is not None) or not (
            RowPairs.by_gram(rows, fewest) and self.model.looks_up_whole(2 * fewest)
        ):
            return self._dealt_batches(pairs)
        count, positives = pairs.by_cell(trainer.batch_size, rows)
        if not self.hot_counted:  # the first batch's hot rows serve the run (pair_batch)
            first = count[0].view(rows, rows)
            if trainer.device.type == "cpu" and HotRows.counted(first.sum(0) + first.sum(1)) is not None:
                return self._dealt_batches(pairs)  # pair_batch counts them
            self.hot, self.hot_counted = None, True
        sizes = (count.sum(1).tolist(), positives.sum(1).tolist())
        cells = (part.to(trainer.device, torch.float32) for part in (count, positives))  # as pair_batch counts them
        return itertools.starmap(_CellBatch, zip(*cells, *sizes, strict=True))

    def _dealt_batches(self, pairs: AuthorsPairs) -> Iterator[tuple[torch.Tensor, ...]]:
        for batch in pairs.batches(self.trainer.batch_size):
            yield tuple(torch.as_tensor(part).to(self.trainer.device) for part in batch)

    def take_pairs(self, batch: _CellBatch | tuple[torch.Tensor, ...]) -> None:
        """An authors' batch of `pair_batches`, counted per cell or dealt."""
        if isinstance(batch, _CellBatch):
            self.cell_batch(batch)
        else:
            self.pair_batch(*batch)

    def cell_batch(self, batch: _CellBatch) -> None:
        """`pair_batch` of a batch counted per cell of the whole table's Gram matrix."""
        table, lookup = self.model.lookup(None)
        count, positives = batch.count, batch.positives
        loss, d_affine, table_grad = RowPairs.cell_gradients(table, count, positives, batch.pairs, self.affine)
        self._update(lookup, table_grad, d_affine, loss, batch.n_positives)

    def pair_batch(self, targets: torch.Tensor, others: torch.Tensor, labels: torch.Tensor) -> None:
        """The authors' step (trainer.batching=buckets), in closed form: the mean binary cross-entropy of the batch's
        pairs (models.RowPairs)."""
        table, lookup = self.model.lookup(torch.cat([targets, others]))
        ends = torch.arange(len(table), device=table.device) if lookup.index is None else lookup.index  # rows in table
        if not self.hot_counted:  # the first batch's hot rows serve the run: every batch samples the same stream
            self.hot, self.hot_counted = HotRows.of(ends, len(table)), True
        loss, d_affine, table_grad = RowPairs(table, ends, self.hot).gradients(labels, self.affine)
        self._update(lookup, table_grad, d_affine, loss, labels.sum())  # the loss per positive pair, as the walks'

    def _warm_up(self, walks: torch.Tensor, valid: torch.Tensor | None, negatives: torch.Tensor) -> None:
        """An eager step on a side stream: what CUDA graphs need before a capture (cuBLAS and allocator set-up)."""
        device = self.trainer.device
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            self.compute(walks, valid, negatives)
        torch.cuda.current_stream(device).wait_stream(side)

    def compute(
        self,
        walks: torch.Tensor,
        valid: torch.Tensor | None,
        negatives: torch.Tensor,
        rows: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        """A step; `rows`: the feature rows of the positions and negatives, where gathered beforehand (`_batch`)."""
        model, trainer = self.model, self.trainer
        w, s, z = negatives.shape
        positions = _positions(walks, valid)
        if model.negatives_as_features(w * s * (1 + z)):
            position_rows, negative_rows = rows or self._rows(positions, negatives)
            gradients = feature_walk_gradients(model, position_rows, valid, negative_rows, trainer.window, self.affine)
            self._apply(*gradients)
            return
        nodes = torch.cat([positions.reshape(-1), negatives.view(-1)])
        table, lookup = model.lookup(nodes)
        dim = table.shape[1]
        if lookup.index is None:  # a row per id: the walks' positions, then the negatives
            table_grad = torch.empty_like(table)
            walk_rows, negative_rows = table[: w * s].view(w, s, dim), table[w * s :].view(w, s, z, dim)
            sampled = GatheredNegatives(negative_rows, table_grad[w * s :].view(w, s, z, dim))
        else:
            walk_rows = table.index_select(0, lookup.index[: w * s]).view(w, s, dim)
            sampled = TableNegatives(table, lookup.index[w * s :].view(w, s, z))
        loss, count, d_walks, d_affine = walk_skipgram_gradients(walk_rows, valid, sampled, trainer.window, self.affine)
        if lookup.index is None:
            table_grad[: w * s] = d_walks.view(-1, dim)
        else:
            table_grad = sampled.table_grad.index_add_(0, lookup.index[: w * s], d_walks.view(-1, dim))
        self._update(lookup, table_grad, d_affine, loss, count)

    def _update(
        self, lookup: Lookup, table_grad: torch.Tensor, d_affine: torch.Tensor, loss: torch.Tensor, pairs: torch.Tensor
    ) -> None:
        """Adam's step from the gradient of the lookup's table and of the logit's scale and bias (_apply)."""
        self._apply(self.model.weight_gradient(lookup, table_grad), d_affine, loss, pairs)

    def _apply(
        self, weight_grad: torch.Tensor, d_affine: torch.Tensor, loss: torch.Tensor, pairs: torch.Tensor | int
    ) -> None:
        """Adam's step from W's gradient and the logit's scale and bias's; the step's loss and positive pairs added to
        the epoch's sums."""
        self.optimiser.step([weight_grad, d_affine])
        self.loss_sum += loss
        self.pair_sum += pairs


class _CapturedStep:
    """A step captured in a CUDA graph: its inputs are copied into fixed buffers, then the graph replays."""

    def __init__(self, step: _SkipGramStep, walks: torch.Tensor, valid: torch.Tensor | None, negatives: torch.Tensor):
        self.walks, self.negatives = walks.clone(), negatives.clone()
        self.valid = None if valid is None else valid.clone()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            step.compute(self.walks, self.valid, self.negatives)

    @classmethod
    def capture(cls, step: _SkipGramStep, walks, valid, negatives) -> _CapturedStep | None:
        """Capture the step and run it; None (and the step run eagerly) where an operation cannot be captured."""
        try:
            captured = cls(step, walks, valid, negatives)
        except RuntimeError as error:  # nothing ran inside the failed capture
            reason = f"a batch shape's step runs eagerly, its CUDA graph capture failed: {first_line(error)}"
            log.warning("trainer.cuda_graphs: %s", reason)
            step.capture_failure = step.capture_failure or reason
            step.compute(walks, valid, negatives)
            return None
        captured.graph.replay()
        return captured

    def replay(self, walks: torch.Tensor, valid: torch.Tensor | None, negatives: torch.Tensor) -> None:
        self.walks.copy_(walks)
        self.negatives.copy_(negatives)
        if valid is not None:
            self.valid.copy_(valid)
        self.graph.replay()


@torch.no_grad()
def feature_walk_steps(
    model: IGELEmbedding,
    positions: torch.Tensor,
    negatives: torch.Tensor,
    window: int,
    affine: torch.Tensor,
    optimiser: _FusedAdam,
) -> tuple[torch.Tensor, int]:
    """Consecutive steps of batches of walks without dead ends whose negatives stay rows of X, given the feature rows
    of their positions (k × w × s × ℓ) and negatives (k × w × s × z × ℓ), each its gradients
    (models.feature_walk_gradients) and Adam's update: what trainer.compile compiles, as one graph. Returns the steps'
    loss summed over their positive pairs, and their number."""
    losses, pairs = [], 0
    for batch, drawn in zip(positions.unbind(), negatives.unbind(), strict=True):
        weight_grad, d_affine, loss, count = feature_walk_gradients(model, batch, None, drawn, window, affine)
        optimiser.traced_step([weight_grad, d_affine])
        losses.append(loss)
        pairs += count
    return torch.stack(losses).sum(), pairs


class CompiledStep:
    """A step's function compiled by torch.compile (trainer.compile), one graph per batch shape, with no break: on the
    CPU Inductor writes its elementwise work and reductions as a few C++ loops, where eager torch dispatches ~80
    operations a step. Where it cannot compile (no C++ compiler, an operation it cannot lower), the function runs
    eagerly from then on, with a warning: compiling changes nothing, so a call that failed to compile is made again.

    Inductor's C++ wrapper calls the step's kernels from C++, not from generated Python: the same kernels and bits,
    a step of the 2^20-node scalability run 0.65 against 0.73 ms (docs/experiments.md), for a few seconds more of
    compiling the first time on a machine."""

    def __init__(self, function: Callable):
        self.function = function
        self.compiled: Callable | None = torch.compile(
            function, fullgraph=True, dynamic=False, options={"cpp_wrapper": True}
        )
        self.failure: str | None = None  # why it runs eagerly, once it does
        self.ran = False  # whether a step ran compiled
        # the step's per-shape constants are cached pure functions, which Dynamo traces through (and says so)
        warnings.filterwarnings("ignore", message="Dynamo detected a call to a `functools.lru_cache`")

    def __call__(self, *args):
        if self.compiled is not None:
            try:
                result = self.compiled(*args)
                self.ran = True
                return result
            except torch._dynamo.exc.TorchDynamoException as error:  # what compiling raises, Inductor's errors too
                interrupt = _interrupt_in(error)
                if interrupt is not None:  # a memory budget's signal that landed while it compiled
                    raise interrupt from None
                self.failure = f"the step runs eagerly, it could not be compiled: {first_line(error)}"
                log.warning("trainer.compile: %s", self.failure)
                self.compiled = None
        return self.function(*args)

    def unused(self) -> str | None:
        """Why no step ran compiled though none failed to: none was of the kind it compiles, or never STEPS_PER_CALL
        of them in a row."""
        if self.ran:
            return None
        return (
            f"no {STEPS_PER_CALL} steps in a row were of the kind it compiles (an IGEL model whose negatives stay rows"
            " of X, batches of one shape): all ran eagerly"
        )


def _interrupt_in(error: BaseException) -> IgelError | None:
    """The user-facing error (a BudgetError raised by a signal) that Dynamo wrapped, if any."""
    while error is not None:
        if isinstance(error, IgelError):
            return error
        error = error.__cause__ or error.__context__
    return None


class _FusedAdam:
    """torch's fused Adam update (default betas and eps) without torch.optim.Optimizer around it, nor the functional
    adam's grouping by device and dtype (one group here): their bookkeeping costs more than the update of IGEL's small
    W, 20 against 8 µs a step (a few percent of a run of many small batches). The same kernels as torch's.

    Both updates take the gradients in the parameters' order and leave out those past the last parameter (the logit's
    scale and bias's, where the trainer does not learn them)."""

    BETAS, EPS = (0.9, 0.999), 1e-8  # torch's defaults

    def __init__(self, parameters: list[torch.Tensor], lr: float):
        self.parameters = parameters
        self.lr = lr
        self.moments = [torch.zeros_like(parameter) for parameter in parameters]
        self.squares = [torch.zeros_like(parameter) for parameter in parameters]
        self.steps = [torch.zeros((), device=parameter.device) for parameter in parameters]

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor]) -> None:
        torch._foreach_add_(self.steps, 1)
        (beta1, beta2), eps = self.BETAS, self.EPS
        torch._fused_adam_(
            self.parameters, grads[: len(self.parameters)], self.moments, self.squares, [], self.steps,
            amsgrad=False, lr=self.lr, beta1=beta1, beta2=beta2, weight_decay=0.0, eps=eps, maximize=False,
        )  # fmt: skip

    @torch.no_grad()
    def traced_step(self, grads: list[torch.Tensor]) -> None:
        """The same update as plain tensor operations, which torch.compile traces into a compiled step (it cannot
        functionalise the fused kernel); equal to `step` up to float rounding."""
        (beta1, beta2), eps = self.BETAS, self.EPS
        for parameter, grad, moment, square, step in zip(
            self.parameters, grads[: len(self.parameters)], self.moments, self.squares, self.steps, strict=True
        ):
            step.add_(1)
            moment.lerp_(grad, 1 - beta1)
            square.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            exact = step.double()  # as the fused kernel: 1 − β₂ᵗ in float32 keeps ~3 digits at t = 1
            # stacked, the two bias corrections are computed once a step: inlined in the update, Inductor computed
            # both powers for every 8 entries of W (17 against 9 µs a step of the scalability runs' Adam)
            root, scale = torch.stack([(1 - beta2**exact).sqrt(), 1 / (1 - beta1**exact) * self.lr]).float()
            parameter.sub_(moment / (square.sqrt() / root).add_(eps) * scale)


@dataclass
class SupervisedResult:
    """How a supervised fit ended: the restored epoch, its validation score, and the per-epoch history."""

    best_epoch: int  # 0 when no epoch produced a finite score (the initial parameters are kept)
    best_score: float
    epochs: int  # epochs run
    stopped_early: bool
    history: list[dict[str, float]] = field(default_factory=list)


class SupervisedTrainer:
    """Mini-batches of training nodes, a supervised loss and Adam; after every epoch a validation score (higher
    is better) drives early stopping with `patience`, and the parameters of the best epoch are restored.

    The model maps node ids to outputs and holds its inputs as buffers (moved with it to the device); `targets`
    are aligned with `nodes`. The best parameters are kept in memory, on the device: a copy of the weights.
    """

    def __init__(
        self,
        epochs: int,
        batch_size: int,
        lr: float,
        patience: int,
        device: torch.device,
        seed: int,
        weight_decay: float = 0.0,
        progress: bool = True,
    ):
        if epochs < 1 or batch_size < 1 or patience < 1 or lr <= 0 or weight_decay < 0:
            raise ConfigError(
                "trainer.epochs, trainer.batch_size, trainer.patience and trainer.lr must be positive and"
                f" trainer.weight_decay non-negative, got {epochs}, {batch_size}, {patience}, {lr}, {weight_decay}"
            )
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.patience = patience
        self.device = device
        self.seed = seed
        self.weight_decay = weight_decay
        self.progress = progress

    def fit(
        self,
        model: torch.nn.Module,
        nodes: np.ndarray | torch.Tensor,
        targets: np.ndarray | torch.Tensor,
        validate: Callable[[torch.nn.Module], float],
        loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = multilabel_loss,
        score_name: str = "valid_score",
        on_epoch: EpochCallback | None = None,
    ) -> SupervisedResult:
        """Train `model` in place; `validate(model)` (called in eval mode, without gradients) scores an epoch."""
        keep_freed_memory()
        model.to(self.device).train()
        nodes = torch.as_tensor(nodes, dtype=torch.int64).to(self.device)
        targets = torch.as_tensor(targets, dtype=torch.float32).to(self.device)
        trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
        optimiser = torch.optim.Adam(trainable, lr=self.lr, weight_decay=self.weight_decay)
        generator = torch.Generator(device=self.device).manual_seed(self.seed)
        best = _snapshot(model)
        result = SupervisedResult(best_epoch=0, best_score=float("-inf"), epochs=0, stopped_early=False)
        waited = 0
        bar = tqdm(range(1, self.epochs + 1), desc="epochs", unit="epoch", disable=not self.progress)
        for epoch in bar:
            started = time.perf_counter()
            total = torch.zeros((), device=self.device)
            order = torch.randperm(len(nodes), generator=generator, device=self.device)
            for start in range(0, len(nodes), self.batch_size):
                batch = order[start : start + self.batch_size]
                value = loss(model(nodes[batch]), targets[batch])
                optimiser.zero_grad(set_to_none=True)
                value.backward()
                optimiser.step()
                total += value.detach() * len(batch)  # summed on the device: no synchronisation per batch
            train_loss = total.item() / max(len(nodes), 1)
            trained = time.perf_counter()
            model.eval()
            with torch.no_grad():
                score = float(validate(model))
            model.train()
            values = {
                "loss": train_loss,
                score_name: score,
                "epoch_time_s": trained - started,
                "valid_time_s": time.perf_counter() - trained,
            }
            result.history.append(values)
            result.epochs = epoch
            if score > result.best_score:  # strictly better; NaN never is
                result.best_score, result.best_epoch, best, waited = score, epoch, _snapshot(model), 0
            else:
                waited += 1
            bar.set_postfix(loss=f"{train_loss:.4f}", score=f"{score:.4f}", best=result.best_epoch, refresh=False)
            log.debug("epoch %d: loss %.5f, %s %.5f", epoch, train_loss, score_name, score)
            if on_epoch is not None:
                on_epoch(epoch, values)
            if waited >= self.patience:
                result.stopped_early = True
                break
        bar.close()
        _restore(model, best)
        model.eval()
        log.info(
            "%d epochs%s; best %s %.5f at epoch %d (restored)",
            result.epochs,
            " (early stop)" if result.stopped_early else "",
            score_name,
            result.best_score,
            result.best_epoch,
        )
        return result


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the parameters (the buffers are inputs that training does not change)."""
    return {name: parameter.detach().clone() for name, parameter in model.named_parameters()}


def _restore(model: torch.nn.Module, snapshot: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.copy_(snapshot[name])
