"""The trainer: device, seeds, epochs, batches, progress bar and per-epoch metrics. Models own the maths."""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.optim.adam import adam
from tqdm.auto import tqdm

from igel_exp.errors import ConfigError
from igel_exp.models import multilabel_loss, walk_skipgram_gradients
from igel_exp.walks import END, positive_pairs

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
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"trainer.device={name!r} but CUDA is not available on this machine")
    return device


def seed_everything(seed: int, deterministic: bool = True) -> None:
    """Seed every generator; `deterministic` also makes torch pick reproducible kernels (bit-identical reruns;
    without it threaded CPU reductions differ in the last bits from run to run)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # required by deterministic cuBLAS
    torch.use_deterministic_algorithms(deterministic, warn_only=True)


LOGIT_INITS = ("fixed", "uniform")


class SkipGramTrainer:
    """Minimises the negative-sampling loss of random walks with Adam, a batch of whole walks at a time.

    Positive pairs are the nodes at most `window` steps apart in a walk (both orders); every walk position
    draws z negatives from `noise` (a distribution over nodes, uniform when None), shared by the positive
    pairs whose target it is. `batch_size` counts training pairs as the authors did — a positive pair and
    its z negatives count 1 + z — and is rounded to whole walks. With `logit_affine` a pair's probability is
    σ(a · e_t·e_o + b) with a learned scale a and bias b, as in the authors' model: without a bias, embeddings
    that are averages of shared rows of W (IGEL's) cannot give dissimilar pairs a negative logit. `logit_init`
    starts them at a = 1, b = 0 (`fixed`) or, as the authors' nn.Linear(1, 1) did, uniform in [-1, 1) (`uniform`,
    drawn from torch's seeded generator).
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
    ):
        for key, value in [
            ("epochs", epochs),
            ("batch_size", batch_size),
            ("negatives", negatives),
            ("window", window),
        ]:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"trainer.{key} must be a positive integer, got {value!r}")
        if lr <= 0:
            raise ConfigError(f"trainer.lr must be positive, got {lr!r}")
        if logit_init not in LOGIT_INITS:
            raise ConfigError(f"trainer.logit_init={logit_init!r} is not one of {', '.join(LOGIT_INITS)}")
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.negatives = negatives
        self.window = window
        self.device = device
        self.seed = seed
        self.noise = None if noise is None else torch.as_tensor(np.cumsum(noise / noise.sum()), device=device)
        self.logit_affine = logit_affine
        self.logit_init = logit_init
        self.progress = progress

    def walks_per_batch(self, walk_length: int) -> int:
        pairs_per_walk = positive_pairs(walk_length, self.window) * (1 + self.negatives)
        return max(1, round(self.batch_size / max(pairs_per_walk, 1)))

    def fit(
        self,
        model: torch.nn.Module,
        epoch_walks: Callable[[np.random.Generator], Iterable[np.ndarray]],
        on_epoch: EpochCallback | None = None,
    ) -> list[float]:
        """Train `model` in place; `epoch_walks(rng)` yields the walk matrices (walks × length) of an epoch."""
        model.to(self.device).train()
        start = torch.tensor([1.0, 0.0]) if self.logit_init == "fixed" else torch.rand(2) * 2 - 1
        affine = torch.nn.Parameter(start.to(self.device))  # the logit's scale and bias
        weights = list(model.parameters())
        optimiser = _FusedAdam([*weights, affine] if self.logit_affine else weights, self.lr)
        rng = np.random.default_rng(self.seed)
        generator = torch.Generator(device=self.device).manual_seed(self.seed)
        history = []
        for epoch in range(1, self.epochs + 1):
            total, pairs = 0.0, 0
            bar = tqdm(desc=f"epoch {epoch}/{self.epochs}", unit="pair", unit_scale=True, disable=not self.progress)
            for walks in self._batches(epoch_walks(rng)):
                loss, count = self._step(model, weights, affine, optimiser, walks, generator)
                total += loss * count
                pairs += count
                bar.update(count)
                bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            bar.close()
            if pairs == 0:
                raise ConfigError("the walks produced no skip-gram pairs: the graph has no edges")
            history.append(total / pairs)
            log.info("epoch %d/%d: loss %.5f over %d positive pairs", epoch, self.epochs, history[-1], pairs)
            if on_epoch is not None:
                on_epoch(epoch, {"loss": history[-1], "positive_pairs": float(pairs)})
        model.eval()
        return history

    def _batches(self, chunks: Iterable[np.ndarray]) -> Iterator[torch.Tensor]:
        for walks in chunks:
            walks = torch.from_numpy(walks).to(self.device)
            step = self.walks_per_batch(walks.shape[1])
            yield from torch.split(walks, step)

    def _step(
        self, model, weights, affine, optimiser, walks: torch.Tensor, generator: torch.Generator
    ) -> tuple[float, int]:
        w, s = walks.shape
        valid = walks != END
        negatives = self._sample_negatives(model.n_nodes, (w, s, self.negatives), generator)
        nodes = torch.cat([torch.where(valid, walks, 0).ravel(), negatives.ravel()])
        # Embed every position of the batch (the model embeds repeated ids once where that pays); when the batch
        # covers the graph anyway, all nodes in one sparse product then gathered, which needs no sort.
        whole = len(nodes) >= model.n_nodes
        embeddings = model.all_nodes() if whole else model(nodes)
        table = embeddings.detach().index_select(0, nodes) if whole else embeddings.detach()
        dim = table.shape[1]
        scale, bias = affine.tolist()
        loss, count, d_walks, d_negatives, d_affine = walk_skipgram_gradients(
            table[: w * s].view(w, s, dim),
            valid,
            table[w * s :].view(w, s, self.negatives, dim),
            self.window,
            scale,
            bias,
        )
        d_walks, d_negatives = d_walks.view(-1, dim), d_negatives.view(-1, dim)
        if whole:  # each position's gradient summed into its node's row, both halves straight from where they are
            grad = torch.zeros_like(embeddings).index_add_(0, nodes[: w * s], d_walks)
            grad.index_add_(0, nodes[w * s :], d_negatives)
        else:
            grad = torch.cat([d_walks, d_negatives])
        grads = list(torch.autograd.grad(embeddings, weights, grad))
        optimiser.step([*grads, d_affine] if self.logit_affine else grads)
        return loss, count

    def _sample_negatives(self, n_nodes: int, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        if self.noise is None:
            return torch.randint(n_nodes, shape, generator=generator, device=self.device)
        uniform = torch.rand(shape, generator=generator, device=self.device, dtype=self.noise.dtype)
        return torch.searchsorted(self.noise, uniform).clamp_(max=n_nodes - 1)


class _FusedAdam:
    """torch's fused Adam update (default betas and eps) without torch.optim.Optimizer around it: its
    bookkeeping costs more than the update of IGEL's small W, a few percent of a run of many small batches."""

    def __init__(self, parameters: list[torch.Tensor], lr: float):
        self.parameters = parameters
        self.lr = lr
        self.moments = [torch.zeros_like(parameter) for parameter in parameters]
        self.squares = [torch.zeros_like(parameter) for parameter in parameters]
        self.steps = [torch.zeros((), device=parameter.device) for parameter in parameters]

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor]) -> None:
        adam(
            self.parameters, grads, self.moments, self.squares, [], self.steps,
            fused=True, amsgrad=False, beta1=0.9, beta2=0.999, lr=self.lr, weight_decay=0.0, eps=1e-8, maximize=False,
        )  # fmt: skip


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
