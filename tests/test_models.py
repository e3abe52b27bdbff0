import igraph as ig
import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from igel_exp.encoding import IGELEncoder
from igel_exp.models import FreeEmbedding, IGELEmbedding, embed_all, negative_sampling_loss
from igel_exp.training import SkipGramTrainer, resolve_device
from igel_exp.walks import CSRGraph, epoch_pairs

from conftest import small_graphs


def test_igel_embedding_is_the_sparse_product_with_w():
    features = IGELEncoder(2).fit_transform(small_graphs()["miserables"])
    model = IGELEmbedding(features, dim=5)
    nodes = torch.tensor([3, 0, 3, 76, 10])
    expected = torch.as_tensor(features[nodes.numpy()].toarray()) @ model.weight
    torch.testing.assert_close(model(nodes), expected)


def test_unseen_structures_start_at_zero_and_get_no_gradient():
    features = sp.csr_matrix(np.array([[0.5, 0.0, 0.5], [1.0, 0.0, 0.0]], dtype=np.float32))
    model = IGELEmbedding(features, dim=4)
    assert torch.all(model.weight[1] == 0) and torch.all(model.weight[0] != 0)
    model(torch.tensor([0, 1])).sum().backward()
    assert torch.all(model.weight.grad[1] == 0)


def test_negative_sampling_loss_matches_the_formula():
    generator = torch.Generator().manual_seed(0)
    target, context = torch.randn(6, 3, generator=generator), torch.randn(6, 3, generator=generator)
    negatives = torch.randn(6, 4, 3, generator=generator)
    manual = 0.0
    for i in range(6):
        manual -= F.logsigmoid(target[i] @ context[i])
        manual -= sum(F.logsigmoid(-(target[i] @ negatives[i, j])) for j in range(4))
    torch.testing.assert_close(negative_sampling_loss(target, context, negatives), manual / 6)


def test_device_selection():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="trainer.device"):
            resolve_device("cuda")


def _train(graph: ig.Graph, seed: int, model_seed: int = 0) -> tuple[np.ndarray, list[float]]:
    torch.manual_seed(model_seed)
    model = IGELEmbedding(IGELEncoder(1).fit_transform(graph), dim=8)
    csr = CSRGraph.from_igraph(graph)
    trainer = SkipGramTrainer(
        epochs=3, batch_size=2000, lr=0.05, negatives=5, device=torch.device("cpu"), seed=seed, progress=False
    )
    history = trainer.fit(model, lambda rng: epoch_pairs(csr, 2, 20, 3, rng))
    return embed_all(model, torch.device("cpu")), history


def test_training_lowers_the_loss_and_is_reproducible():
    graph = small_graphs()["miserables"]
    first, history = _train(graph, seed=3)
    again, history_again = _train(graph, seed=3)
    other, _ = _train(graph, seed=4)
    assert history[-1] < history[0]
    assert history == history_again
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_free_embedding_is_a_lookup():
    model = FreeEmbedding(10, 3)
    torch.testing.assert_close(model(torch.tensor([2, 7])), model.table.weight[[2, 7]])
