"""The maths: IGEL's embedding layer e_n = x_nᵀ W (paper Eq. SimpleModel) and the skip-gram loss."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn


class IGELEmbedding(nn.Module):
    """Embeds nodes as the weighted sum of the rows of W selected by their sparse IGEL features.

    The features (|V| × ℓ, already transformed and normalised) are fixed buffers; only W (ℓ × d) learns.
    """

    def __init__(self, features: sp.csr_matrix, dim: int):
        super().__init__()
        features = sp.csr_matrix(features)
        self.register_buffer("indptr", torch.as_tensor(features.indptr, dtype=torch.int64))
        self.register_buffer("indices", torch.as_tensor(features.indices, dtype=torch.int64))
        self.register_buffer("values", torch.as_tensor(features.data, dtype=torch.float32))
        self.weight = nn.Parameter(torch.empty(features.shape[1], dim))
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(dim))
        # Structures never seen in training get no gradient; a zero row keeps them out of unseen graphs.
        with torch.no_grad():
            seen = torch.zeros(features.shape[1], dtype=torch.bool)
            seen[self.indices] = True
            self.weight[~seen] = 0.0

    @property
    def n_nodes(self) -> int:
        return len(self.indptr) - 1

    def forward(self, nodes: torch.Tensor) -> torch.Tensor:
        """Embeddings (len(nodes) × d) of the given node ids."""
        starts, ends = self.indptr[nodes], self.indptr[nodes + 1]
        lengths = ends - starts
        offsets = torch.cumsum(lengths, 0) - lengths
        # positions of every selected row's entries in the CSR arrays, row after row
        within = torch.arange(int(lengths.sum()), device=nodes.device) - torch.repeat_interleave(offsets, lengths)
        flat = torch.repeat_interleave(starts, lengths) + within
        return F.embedding_bag(
            self.indices[flat], self.weight, offsets, mode="sum", per_sample_weights=self.values[flat]
        )


class FreeEmbedding(nn.Module):
    """A free vector per node (the transductive DeepWalk / node2vec model)."""

    def __init__(self, n_nodes: int, dim: int):
        super().__init__()
        self.table = nn.Embedding(n_nodes, dim)
        nn.init.normal_(self.table.weight, std=1.0 / math.sqrt(dim))

    @property
    def n_nodes(self) -> int:
        return self.table.num_embeddings

    def forward(self, nodes: torch.Tensor) -> torch.Tensor:
        return self.table(nodes)


def negative_sampling_loss(target: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
    """Mean over positives of −log σ(e_t·e_o) − Σ_i log σ(−e_t·e_i) (paper Eq. negsamp, negated).

    target, context: (B × d); negatives: (B × z × d).
    """
    positive = (target * context).sum(-1)
    negative = torch.bmm(negatives, target.unsqueeze(-1)).squeeze(-1)
    return -(F.logsigmoid(positive) + F.logsigmoid(-negative).sum(-1)).mean()


@torch.no_grad()
def embed_all(model: nn.Module, device: torch.device, batch_size: int = 65536) -> np.ndarray:
    """Embeddings of every node (|V| × d) as float32 numpy."""
    model.eval()
    parts = [
        model(torch.arange(start, min(start + batch_size, model.n_nodes), device=device)).cpu()
        for start in range(0, model.n_nodes, batch_size)
    ]
    model.train()
    return torch.cat(parts).numpy() if parts else np.zeros((0, 0), dtype=np.float32)
