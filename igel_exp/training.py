"""The trainer: device, seeds, epochs, batches, progress bar and per-epoch metrics. Models own the maths."""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import torch
from tqdm.auto import tqdm

from igel_exp.errors import ConfigError
from igel_exp.models import negative_sampling_loss

log = logging.getLogger(__name__)

EpochCallback = Callable[[int, dict[str, float]], None]
PairChunks = Iterable[tuple[np.ndarray, np.ndarray]]


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


class SkipGramTrainer:
    """Minimises the negative-sampling loss over walk pairs with Adam.

    `batch_size` counts training pairs as the authors did: each positive pair brings its z negatives,
    so a batch holds batch_size / (1 + z) positives. Negatives are drawn from `noise` (a distribution
    over nodes, uniform when None).
    """

    def __init__(
        self,
        epochs: int,
        batch_size: int,
        lr: float,
        negatives: int,
        device: torch.device,
        seed: int,
        noise: np.ndarray | None = None,
        progress: bool = True,
    ):
        if epochs < 1 or batch_size < 1 or negatives < 0 or lr <= 0:
            raise ConfigError(
                "trainer.epochs, trainer.batch_size and trainer.lr must be positive and trainer.negatives"
                f" non-negative, got {epochs}, {batch_size}, {lr}, {negatives}"
            )
        self.epochs = epochs
        self.positives_per_batch = max(1, batch_size // (1 + negatives))
        self.lr = lr
        self.negatives = negatives
        self.device = device
        self.seed = seed
        self.noise = None if noise is None else torch.as_tensor(np.cumsum(noise / noise.sum()), device=device)
        self.progress = progress

    def fit(
        self,
        model: torch.nn.Module,
        epoch_pairs: Callable[[np.random.Generator], PairChunks],
        on_epoch: EpochCallback | None = None,
    ) -> list[float]:
        """Train `model` in place; `epoch_pairs(rng)` yields the (targets, contexts) chunks of one epoch."""
        model.to(self.device).train()
        optimiser = torch.optim.Adam(model.parameters(), lr=self.lr)
        rng = np.random.default_rng(self.seed)
        generator = torch.Generator(device=self.device).manual_seed(self.seed)
        history = []
        for epoch in range(1, self.epochs + 1):
            total, pairs = 0.0, 0
            bar = tqdm(desc=f"epoch {epoch}/{self.epochs}", unit="pair", unit_scale=True, disable=not self.progress)
            for targets, contexts in self._batches(epoch_pairs(rng)):
                loss = self._step(model, optimiser, targets, contexts, generator)
                total += loss * len(targets)
                pairs += len(targets)
                bar.update(len(targets))
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

    def _batches(self, chunks: PairChunks) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for targets, contexts in chunks:
            targets = torch.from_numpy(targets).to(self.device)
            contexts = torch.from_numpy(contexts).to(self.device)
            for start in range(0, len(targets), self.positives_per_batch):
                end = start + self.positives_per_batch
                yield targets[start:end], contexts[start:end]

    def _step(self, model, optimiser, targets, contexts, generator) -> float:
        negatives = self._sample_negatives(model.n_nodes, (len(targets), self.negatives), generator)
        # one forward pass over the batch's distinct nodes, then gathers
        nodes, inverse = torch.unique(torch.cat([targets, contexts, negatives.ravel()]), return_inverse=True)
        embeddings = model(nodes)
        b = len(targets)
        target = embeddings[inverse[:b]]
        context = embeddings[inverse[b : 2 * b]]
        negative = embeddings[inverse[2 * b :]].view(b, self.negatives, embeddings.shape[1])
        loss = negative_sampling_loss(target, context, negative)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        return loss.item()

    def _sample_negatives(self, n_nodes: int, shape: tuple[int, int], generator: torch.Generator) -> torch.Tensor:
        if self.noise is None:
            return torch.randint(n_nodes, shape, generator=generator, device=self.device)
        uniform = torch.rand(shape, generator=generator, device=self.device, dtype=self.noise.dtype)
        return torch.searchsorted(self.noise, uniform).clamp_(max=n_nodes - 1)
