import logging
import os
import shutil
import subprocess
import sys
import threading
from contextlib import nullcontext
from types import SimpleNamespace

import igraph as ig
import numpy as np
import pytest
import scipy.sparse as sp
import threadpoolctl
import torch
import torch.nn.functional as F

from igel_exp import training
from igel_exp.encoding import IGELEncoder
from igel_exp.errors import BudgetError, ConfigError
from igel_exp.models import (
    FeatureNegatives,
    FreeEmbedding,
    GatheredNegatives,
    IGELEmbedding,
    RowPairs,
    TableNegatives,
    distinct_ids,
    embed_all,
    sum_rows_by,
    walk_skipgram_gradients,
)
from igel_exp.training import (
    COMPILE_FROM_STEPS,
    CompiledStep,
    SkipGramTrainer,
    _CellBatch,
    _SkipGramStep,
    batch_scale_for,
    compiles,
    resolve_device,
    seed_everything,
    set_threads,
)
from igel_exp.walks import END, AuthorsPairs, CSRGraph, DeviceWalker, epoch_walks

from conftest import small_graphs


@pytest.fixture(params=["dense", "sparse", "hybrid"])
def layout(request, monkeypatch):
    """IGELEmbedding keeps X dense, as CSR, or its most filled columns dense and the rest as CSR, depending on
    its fill; every layout must give the same maths."""
    monkeypatch.setattr(IGELEmbedding, "DENSE_WIDTH", 10**9 if request.param == "dense" else 0)
    monkeypatch.setattr(IGELEmbedding, "DENSE_FILL", 10**9)
    if request.param == "sparse":
        monkeypatch.setattr(IGELEmbedding, "HOT_FILL", 0)
    return request.param


@pytest.mark.parametrize("ids", [[3, 0, 3, 76, 10], [5, 9, 5, 0, 76] * 5], ids=["few", "many repeats"])
def test_igel_embedding_is_the_sparse_product_with_w_and_backpropagates_x_transposed(layout, device, ids):
    features = IGELEncoder(2).fit_transform(small_graphs()["miserables"])
    model = IGELEmbedding(features, dim=5).to(device)
    assert model.dense == (layout == "dense")
    assert model.rows.shape[1] == {"dense": features.shape[1], "sparse": 0}.get(layout, model.rows.shape[1])
    assert layout != "hybrid" or 0 < model.rows.shape[1] < features.shape[1]
    assert (IGELEmbedding.REPEATS * len(ids) >= model.n_nodes) == (len(ids) > 5)  # the sparse layout dedupes these
    nodes = torch.tensor(ids, device=device)
    selected = torch.as_tensor(features[nodes.cpu().numpy()].toarray(), device=device)
    embeddings = model(nodes)
    torch.testing.assert_close(embeddings, selected @ model.weight)
    upstream = torch.randn_like(embeddings)
    embeddings.backward(upstream)
    torch.testing.assert_close(model.weight.grad, selected.T @ upstream)


@pytest.mark.parametrize("dim", [5, 64], ids=["narrow", "wide"])  # _product's two orders
def test_bfloat16_precision_multiplies_the_dense_columns_in_bfloat16_and_keeps_w_float32(layout, device, dim):
    features = IGELEncoder(2).fit_transform(small_graphs()["miserables"])
    exact, fast = IGELEmbedding(features, dim).to(device), IGELEmbedding(features, dim, "bfloat16").to(device)
    with torch.no_grad():
        fast.weight.copy_(exact.weight)
    nodes = torch.tensor([3, 0, 3, 76, 10], device=device)
    reference, embeddings = exact(nodes), fast(nodes)
    upstream = torch.randn_like(reference)
    reference.backward(upstream)
    embeddings.backward(upstream)
    assert embeddings.dtype == fast.weight.dtype == fast.weight.grad.dtype == torch.float32
    if layout == "sparse":  # no dense column: nothing is multiplied in bfloat16
        torch.testing.assert_close(embeddings, reference, rtol=0, atol=0)
        return
    assert fast.rows.dtype == torch.bfloat16
    assert not torch.equal(embeddings, reference)
    # 8 bits of mantissa in X's entries and in each product: a relative error of a few 2⁻⁸
    for ours, theirs in [(embeddings.detach(), reference.detach()), (fast.weight.grad, exact.weight.grad)]:
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0.02 * float(theirs.abs().max()))


def test_an_unknown_precision_is_one_line_naming_the_key():
    features = IGELEncoder(1).fit_transform(small_graphs()["zachary"])
    with pytest.raises(ConfigError, match=r"trainer.precision='float16' is not one of float32, bfloat16"):
        IGELEmbedding(features, 3, "float16")


def test_features_are_dense_only_when_few_and_not_too_sparse():
    def fill(width: int, per_row: int) -> sp.csr_matrix:
        rows = np.repeat(np.arange(50), per_row)
        columns = np.concatenate(
            [np.random.default_rng(row).choice(width, per_row, replace=False) for row in range(50)]
        )
        return sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, columns)), shape=(50, width))

    assert IGELEmbedding(fill(64, 4), 3).dense  # few features, 1 in 16 nonzero
    assert not IGELEmbedding(fill(64, 1), 3).dense  # 1 in 64: the dense copy would be mostly zeros
    assert not IGELEmbedding(fill(512, 128), 3).dense  # too many features for dense products
    # beside sparse ones, the columns that at least 1 node in HOT_FILL has are dense: 9 and the last here
    features = sp.hstack([fill(512, 1), sp.csr_matrix(np.ones((50, 1), dtype=np.float32))]).tolil()
    features[:5, 7] = 1.0
    features[:12, 9] = 1.0
    features = features.tocsr()
    model = IGELEmbedding(features, 3)
    assert model.hot.tolist() == [9, 512] and not model.dense
    assert torch.equal(model.rows, torch.as_tensor(features[:, [9, 512]].toarray()))


def test_unseen_structures_start_at_zero_and_get_no_gradient(layout):
    features = sp.csr_matrix(np.array([[0.5, 0.0, 0.5], [1.0, 0.0, 0.0]], dtype=np.float32))
    model = IGELEmbedding(features, dim=4)
    assert torch.all(model.weight[1] == 0) and torch.all(model.weight[0] != 0)
    model(torch.tensor([0, 1])).sum().backward()
    assert torch.all(model.weight.grad[1] == 0)


def pairwise_loss(
    walks: np.ndarray, table: torch.Tensor, negatives: np.ndarray, window: int, affine: torch.Tensor
) -> torch.Tensor:
    """The paper's loss written pair by pair: every (target, context) at most `window` apart, both orders,
    with the z negatives drawn for the target's walk position; logits a·e_t·e_o + b; averaged over the
    positive pairs."""
    scale, bias = affine
    terms = []
    for w, walk in enumerate(walks):
        for i, j in [(i, j) for i in range(len(walk)) for j in range(len(walk)) if 0 < abs(i - j) <= window]:
            if walk[i] == END or walk[j] == END:
                continue
            target = table[walk[i]]
            term = -F.logsigmoid(scale * (target @ table[walk[j]]) + bias)
            terms.append(term - sum(F.logsigmoid(-(scale * (target @ table[n]) + bias)) for n in negatives[w, i]))
    return torch.stack(terms).mean()


WALKS = {  # walks, and their ordered positive pairs per window
    "dead ends": (
        np.array([[0, 1, 2, 3, 4], [5, 6, 7, END, END], [8, END, END, END, END]]),
        {2: 2 * (7 + 3), 6: 2 * 13},
    ),
    "full": (np.array([[0, 1, 2, 3, 4], [5, 6, 7, 8, 0], [8, 1, 4, 6, 2]]), {2: 3 * 2 * 7, 6: 3 * 2 * 10}),
}


@pytest.fixture(params=["sampled product", "gathered rows"])
def table_reads(request, monkeypatch):
    """TableNegatives reads the drawn rows in place by a sampled product (the CPU), or gathers them (a GPU)."""
    if request.param == "gathered rows":
        monkeypatch.setattr(TableNegatives, "SAMPLED_PRODUCT_ON", ())


@pytest.mark.parametrize("walks_case", WALKS)
@pytest.mark.parametrize("scale, bias, window", [(1.0, 0.0, 2), (0.7, -1.3, 2), (0.7, -1.3, 6)])
def test_walk_loss_and_gradients_equal_the_pairwise_formula_and_autograd(
    scale, bias, window, walks_case, device, table_reads
):
    generator = torch.Generator().manual_seed(0)
    table = torch.randn(9, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    affine = torch.tensor([scale, bias], dtype=torch.float64, requires_grad=True)
    walks, pair_counts = WALKS[walks_case]
    negatives = np.random.default_rng(1).integers(9, size=(3, 5, 2))
    reference = pairwise_loss(walks, table, negatives, window=window, affine=affine)
    reference.backward()
    valid = torch.as_tensor(walks != END, device=device)
    walk_rows = torch.as_tensor(np.where(walks == END, 0, walks), device=device)
    negative_rows = torch.as_tensor(negatives, device=device)
    on_device, on_device_affine = table.detach().to(device), affine.detach().to(device)
    mask = None if walks_case == "full" else valid
    # negatives gathered one per draw (their gradients written per draw), or read from the table in place
    d_negatives = torch.empty(3, 5, 2, 4, dtype=torch.float64, device=device)
    gathered = GatheredNegatives(on_device[negative_rows], d_negatives)
    walk_skipgram_gradients(on_device[walk_rows], mask, gathered, window, on_device_affine)  # weights must not change
    loss, count, d_walks, d_affine = walk_skipgram_gradients(
        on_device[walk_rows], mask, gathered, window, on_device_affine
    )
    torch.testing.assert_close(d_affine.cpu(), affine.grad)
    assert int(count) == pair_counts[window]
    assert (loss / count).item() == pytest.approx(reference.item())
    grad = torch.zeros_like(on_device).index_add_(0, walk_rows.ravel(), d_walks.reshape(-1, 4))
    grad.index_add_(0, negative_rows.ravel(), d_negatives.reshape(-1, 4))
    torch.testing.assert_close(grad.cpu(), table.grad)
    assert torch.all(d_walks[~valid] == 0) and torch.all(d_negatives[~valid] == 0)
    in_place = TableNegatives(on_device, negative_rows)
    loss, count, d_walks, d_affine = walk_skipgram_gradients(
        on_device[walk_rows], mask, in_place, window, on_device_affine
    )
    table_grad = in_place.table_grad.index_add_(0, walk_rows.ravel(), d_walks.reshape(-1, 4))
    torch.testing.assert_close(table_grad.cpu(), table.grad)
    torch.testing.assert_close(d_affine.cpu(), affine.grad)


@pytest.mark.parametrize(
    "n_rows, entries",
    [(5, 100), (4039, 14850), (32768, 32767), (32768, 5000), (40000, 50000)],  # sorted by comparison, padded, by radix
)
def test_sum_rows_by_sums_each_rows_entries(n_rows, entries, device):
    """Entry k adds weights[k] · source[picks[k]] to row rows[k], as index_add would, whichever way the rows are
    sorted: their largest row (32,767 in int16 keys) included, which ties with the padding."""
    generator = torch.Generator().manual_seed(n_rows + entries)
    rows = torch.randint(n_rows, (entries,), generator=generator)
    rows[:3] = n_rows - 1
    source = torch.randn(7, 3, generator=generator, dtype=torch.float64)
    picks = torch.randint(7, (entries,), generator=generator)
    weights = torch.randn(entries, generator=generator, dtype=torch.float64)
    expected = torch.zeros(n_rows, 3, dtype=torch.float64).index_add_(0, rows, weights[:, None] * source[picks])
    on = [part.to(device) for part in (rows, source, picks, weights)]
    torch.testing.assert_close(sum_rows_by(on[0], n_rows, *on[1:]).cpu(), expected)


@pytest.mark.parametrize("walks_case", WALKS)
def test_negatives_kept_as_feature_rows_give_the_loss_and_gradients_of_their_embeddings(walks_case, device):
    """FeatureNegatives dots a position's projection W e_t with its negatives' rows of X instead of embedding them:
    the same loss, and the same gradient of W as autograd through e = X W."""
    generator = torch.Generator().manual_seed(0)
    features = torch.rand(9, 6, generator=generator, dtype=torch.float64)
    weight = torch.randn(6, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    affine = torch.tensor([0.7, -1.3], dtype=torch.float64, requires_grad=True)
    walks, pair_counts = WALKS[walks_case]
    negatives = np.random.default_rng(1).integers(9, size=(3, 5, 2))
    reference = pairwise_loss(walks, features @ weight, negatives, window=2, affine=affine)
    reference.backward()
    valid = torch.as_tensor(walks != END, device=device)
    walk_rows = torch.as_tensor(np.where(walks == END, 0, walks), device=device)
    negative_rows = torch.as_tensor(negatives, device=device)
    x, w = features.to(device), weight.detach().to(device)
    sampled = FeatureNegatives(x[negative_rows].view(15, 2, 6), w)
    loss, count, d_walks, d_affine = walk_skipgram_gradients(
        x[walk_rows] @ w, None if walks_case == "full" else valid, sampled, 2, affine.detach().to(device)
    )
    assert int(count) == pair_counts[2]
    assert (loss / count).item() == pytest.approx(reference.item())
    torch.testing.assert_close(d_affine.cpu(), affine.grad)
    d_weight = x[walk_rows].reshape(-1, 6).T @ d_walks.reshape(-1, 4) + sampled.weight_grad
    torch.testing.assert_close(d_weight.cpu(), weight.grad)


@pytest.mark.parametrize("precision, tolerance", [("float32", 1e-5), ("bfloat16", 0.05)])
def test_a_dense_model_trains_on_its_negatives_feature_rows_as_on_their_embeddings(
    monkeypatch, device, precision, tolerance
):
    """Batches of fewer ids than nodes keep a dense model's negatives as rows of X: the training is that of the
    embedded negatives (GatheredNegatives), up to rounding, and as reproducible (on a GPU, in CUDA graphs)."""
    graph = small_graphs()["miserables"]
    csr = CSRGraph.from_igraph(graph)

    def train() -> np.ndarray:
        seed_everything(0)
        model = IGELEmbedding(IGELEncoder(1).fit_transform(graph), dim=8, precision=precision)
        trainer = SkipGramTrainer(2, 150, 0.05, 3, 2, device, seed=1, progress=False)
        assert trainer.walks_per_batch(10) == 1  # a walk of 10 and its negatives: 40 ids, of 77 nodes
        trainer.fit(model, lambda rng: epoch_walks(csr, 1, 10, rng))
        return embed_all(model, device)

    model = IGELEmbedding(IGELEncoder(1).fit_transform(graph), dim=8)
    assert model.dense and model.negatives_as_features(40) and not model.negatives_as_features(80)
    kept, again = train(), train()
    np.testing.assert_array_equal(kept, again)
    monkeypatch.setattr(IGELEmbedding, "negatives_as_features", lambda self, n_ids: False)
    embedded = train()
    assert not np.array_equal(kept, embedded)
    np.testing.assert_allclose(kept, embedded, rtol=0, atol=tolerance * np.abs(embedded).max())


@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="torch.compile needs a C++ compiler")
@pytest.mark.parametrize("name", ["miserables", "with_isolated"])
def test_compiled_steps_train_as_the_eager_ones(name, monkeypatch, caplog):
    """trainer.compile: torch.compile turns STEPS_PER_CALL steps of a dense model whose negatives stay rows of X, Adam's
    updates included, into one C++ call; the run trains as the eager one, up to float rounding, over the same positive
    pairs: the steps left over at an epoch's end, and those queued when a batch with a dead end comes (an isolated
    node's walk), run eagerly in their turn. It did compile (no fallback to eager)."""
    graph = small_graphs()[name]
    csr = CSRGraph.from_igraph(graph)
    calls = []

    monkeypatch.setattr(training, "CompiledStep", lambda function: _Recorded(function, calls))
    monkeypatch.setattr(training, "STEPS_PER_CALL", 3)  # a smaller graph to compile; 77 and 62 steps leave a tail

    def train(compiled: bool) -> tuple[np.ndarray, list[dict]]:
        seed_everything(0)
        model = IGELEmbedding(IGELEncoder(1).fit_transform(graph), dim=8)
        trainer = SkipGramTrainer(2, 150, 0.05, 3, 2, torch.device("cpu"), seed=1, progress=False, compiled=compiled)
        epochs = []
        trainer.fit(model, lambda rng: epoch_walks(csr, 1, 10, rng), lambda epoch, values: epochs.append(values))
        assert trainer.fallbacks == {}  # batches of one walk: one shape
        return embed_all(model, torch.device("cpu")), epochs

    eager, eager_epochs = train(False)
    compiled, compiled_epochs = train(True)
    assert calls and set(calls) == {training.STEPS_PER_CALL} and "could not be compiled" not in caplog.text
    assert len(calls) * training.STEPS_PER_CALL < 2 * graph.vcount()  # some steps ran eagerly
    assert [epoch["positive_pairs"] for epoch in compiled_epochs] == [epoch["positive_pairs"] for epoch in eager_epochs]
    np.testing.assert_allclose(
        [epoch["loss"] for epoch in compiled_epochs], [epoch["loss"] for epoch in eager_epochs], rtol=1e-5
    )
    np.testing.assert_allclose(compiled, eager, rtol=0, atol=1e-4 * np.abs(eager).max())


@pytest.mark.parametrize("name, compiled", [("miserables", False), ("with_isolated", False), ("with_isolated", True)])
def test_feature_rows_gathered_ahead_on_another_thread_train_as_gathered_in_the_step(name, compiled, monkeypatch):
    """On the CPU a dense model's steps are prepared on another thread while the ones before train: their negatives
    drawn and the feature rows of their positions and negatives gathered there (compiled calls' too, and the batches
    with a dead end's). The run is the one whose step gathers the rows itself, to the bit."""
    graph = small_graphs()[name]
    csr = CSRGraph.from_igraph(graph)
    monkeypatch.setattr(training, "STEPS_PER_CALL", 3)
    gathered_on = []
    feature_rows = IGELEmbedding.feature_rows

    def recorded(self, nodes):
        gathered_on.append(threading.current_thread() is threading.main_thread())
        return feature_rows(self, nodes)

    monkeypatch.setattr(IGELEmbedding, "feature_rows", recorded)

    def train() -> np.ndarray:
        seed_everything(0)
        model = IGELEmbedding(IGELEncoder(1).fit_transform(graph), dim=8)
        trainer = SkipGramTrainer(2, 150, 0.05, 3, 2, torch.device("cpu"), seed=1, progress=False, compiled=compiled)
        trainer.fit(model, lambda rng: epoch_walks(csr, 1, 10, rng))
        return model.weight.detach().numpy().copy()

    ahead = train()
    # on the main thread: only each epoch's last steps queued for a compiled call (fewer than it takes), eagerly
    assert len(gathered_on) > 20 and sum(gathered_on) <= (2 * 2 * (training.STEPS_PER_CALL - 1) if compiled else 0)
    init = _SkipGramStep.__init__

    def in_the_step(self, *args):
        init(self, *args)
        self.ahead = False

    monkeypatch.setattr(_SkipGramStep, "__init__", in_the_step)
    gathered_on.clear()
    in_step = train()
    assert gathered_on and all(gathered_on)
    np.testing.assert_array_equal(ahead, in_step)


class _Recorded(CompiledStep):
    """A CompiledStep that records how many steps each of its calls runs."""

    def __init__(self, function, calls: list[int]):
        super().__init__(function)
        self.calls = calls

    def __call__(self, *args):
        self.calls.append(len(args[1]))
        return super().__call__(*args)


def test_adams_traced_update_is_the_fused_one():
    """The Adam update a compiled call traces (plain tensor operations) is torch's fused kernel's, up to rounding."""
    generator = torch.Generator().manual_seed(0)
    start = [torch.randn(30, 8, generator=generator), torch.randn(2, generator=generator)]
    fused, traced = ([parameter.clone() for parameter in start] for _ in range(2))
    fused_adam, traced_adam = training._FusedAdam(fused, 0.05), training._FusedAdam(traced, 0.05)
    for _ in range(20):
        grads = [torch.randn(parameter.shape, generator=generator) for parameter in start]
        fused_adam.step(grads)
        traced_adam.traced_step(grads)
    for fused_parameter, traced_parameter, first in zip(fused, traced, start, strict=True):
        assert not torch.equal(traced_parameter, first)
        torch.testing.assert_close(traced_parameter, fused_parameter, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(traced_adam.steps, fused_adam.steps)


def test_a_run_none_of_whose_steps_compile_says_so():
    """trainer.compile=true where no step is of the kind it compiles (free embeddings): the run's record says the steps
    ran eagerly, as it says where compiling failed."""
    csr = CSRGraph.from_igraph(small_graphs()["zachary"])
    trainer = SkipGramTrainer(1, 150, 0.05, 3, 2, torch.device("cpu"), seed=1, progress=False, compiled=True)
    trainer.fit(FreeEmbedding(34, 4), lambda rng: epoch_walks(csr, 1, 10, rng))
    assert trainer.fallbacks == {
        "trainer.compile": f"no {training.STEPS_PER_CALL} steps in a row were of the kind it compiles (an IGEL model"
        " whose negatives stay rows of X, batches of one shape): all ran eagerly"
    }


def test_a_step_that_cannot_be_compiled_runs_eagerly_with_a_warning(caplog):
    def step(x: torch.Tensor) -> torch.Tensor:
        return x * 2 if float(x.sum()) > 0 else x  # a branch on a value: no single graph

    compiled = CompiledStep(step)
    assert torch.equal(compiled(torch.ones(3)), torch.full((3,), 2.0))
    assert compiled.compiled is None and "the step runs eagerly, it could not be compiled" in caplog.text
    assert torch.equal(compiled(-torch.ones(3)), -torch.ones(3))


def test_a_budget_error_raised_while_compiling_stops_the_step():
    """The memory watchdog raises BudgetError by a signal wherever the main thread is: inside Dynamo's compiler it
    comes out wrapped, and must stop the run, not send the step to its eager fallback."""
    step = CompiledStep(lambda x: x)

    def compiling(x: torch.Tensor) -> torch.Tensor:
        try:
            raise BudgetError("task.memory_budget_gib=1: the process holds 1.2 GiB")
        except BudgetError as error:
            raise torch._dynamo.exc.TorchDynamoException("while compiling") from error

    step.compiled = compiling
    with pytest.raises(BudgetError, match="task.memory_budget_gib=1"):
        step(torch.ones(3))


def test_all_nodes_equals_forward_and_backpropagates_x_transposed(layout, device):
    features = IGELEncoder(2).fit_transform(small_graphs()["zachary"])
    model = IGELEmbedding(features, dim=3).to(device)
    everything = model.all_nodes()
    torch.testing.assert_close(everything, model(torch.arange(model.n_nodes, device=device)))
    upstream = torch.randn_like(everything)
    everything.backward(upstream)
    dense = torch.as_tensor(features.toarray(), device=device)
    torch.testing.assert_close(model.weight.grad, dense.T @ upstream)


@pytest.mark.parametrize("layout", ["sparse", "hybrid"], indirect=True)
def test_the_csr_part_as_torch_matrices_gives_the_products_of_its_bags(layout):
    """On a GPU the whole of X's CSR part is multiplied as torch CSR matrices (cuSPARSE), X @ W and Xᵀ @ grad, where
    the CPU sums embedding_bag's bags: both must give the same products, over every column and over those in use."""
    features = IGELEncoder(2).fit_transform(small_graphs()["miserables"])
    model = IGELEmbedding(features, dim=16)
    with model.over_columns_in_use() as layer:
        assert not model.dense and layer.weight.shape[0] < model.weight.shape[0]
        for each in (model, layer):
            bags, matrices = each._csr(None), each._csr(None, as_matrices=True)
            assert bags.matrices is None and matrices.matrices is not None
            weight, width = each.weight.detach(), each.weight.shape[0]
            grad = torch.randn(each.n_nodes, 16)
            torch.testing.assert_close(matrices.embed(weight), bags.embed(weight))
            torch.testing.assert_close(matrices.transposed_product(grad, width), bags.transposed_product(grad, width))


def test_seeding_makes_torch_deterministic_without_loading_its_compiler():
    """seed_everything sets torch's deterministic mode (on and off) in a fresh interpreter without importing
    torch._inductor, which torch.use_deterministic_algorithms does only to set its flag (1.2 s of a run's start),
    and without the NaN that deterministic mode writes into every new tensor (7 % of a Facebook step)."""
    check = (
        "import sys, torch; from igel_exp.training import seed_everything;"
        "seed_everything(0); on = torch.are_deterministic_algorithms_enabled();"
        "filled = bool(torch.empty(1 << 24).isnan().any());"  # 64 MB: fresh pages, zero unless filled
        "seed_everything(0, deterministic=False);"
        "print(on, filled, torch.are_deterministic_algorithms_enabled(), 'torch._inductor' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "False", "False", "False"]


def test_device_selection():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="trainer.device"):
            resolve_device("cuda")
    for name, backend in [("mps", torch.backends.mps), ("xpu:3", torch.xpu)]:  # torch.device takes them; are they here?
        if not backend.is_available():
            with pytest.raises(ConfigError, match=f"trainer.device='{name}' but {name[:3]} is not available"):
                resolve_device(name)
    with pytest.raises(ConfigError, match="trainer.device='cpu:1' but this machine has 1 cpu devices"):
        resolve_device("cpu:1")


def test_a_graph_of_fewer_nodes_than_negatives_trains(device):
    """A triangle with 10 negatives a position: the sampled product cannot hold more draws a row than the table has
    rows, so they are gathered, and score as the table's rows do."""
    table, walks = torch.randn(3, 8, device=device), torch.randn(4, 8, device=device)
    rows = torch.randint(3, (4, 10), device=device)
    expected = (table[rows] * walks.unsqueeze(1)).sum(-1)
    torch.testing.assert_close(TableNegatives(table, rows).dots(walks), expected)
    graph = ig.Graph([(0, 1), (1, 2), (2, 0)])
    model = IGELEmbedding(IGELEncoder(1).fit_transform(graph), dim=4)
    trainer = SkipGramTrainer(2, 100, 0.05, 10, 2, device, seed=0, progress=False)
    history = trainer.fit(model, lambda rng: epoch_walks(CSRGraph.from_igraph(graph), 2, 6, rng))
    assert len(history) == 2 and all(np.isfinite(history))


def _train(
    graph: ig.Graph, seed: int, device: torch.device, batching: str = "walks", window: int = 3
) -> tuple[np.ndarray, list[float]]:
    seed_everything(0)
    model = IGELEmbedding(IGELEncoder(1).fit_transform(graph), dim=8)
    csr = CSRGraph.from_igraph(graph)
    trainer = SkipGramTrainer(
        epochs=3,
        batch_size=2000,
        lr=0.05,
        negatives=5,
        window=window,
        device=device,
        seed=seed,
        progress=False,
        batching=batching,
    )
    history = trainer.fit(model, lambda rng: epoch_walks(csr, 2, 20, rng, walks_per_chunk=50))
    return embed_all(model, device), history


@pytest.mark.parametrize("batching", ["walks", "buckets"])
def test_a_window_wider_than_the_walks_trains_as_the_whole_walk(batching):
    """trainer.window=10^6 on walks of 20: the pairs of a window of 19, as fast (it padded every walk by the window)."""
    graph = small_graphs()["miserables"]
    whole, whole_history = _train(graph, seed=3, device=torch.device("cpu"), batching=batching, window=19)
    wide, wide_history = _train(graph, seed=3, device=torch.device("cpu"), batching=batching, window=10**6)
    np.testing.assert_array_equal(wide, whole)
    assert wide_history == whole_history


@pytest.mark.parametrize("batching", ["walks", "buckets"])
def test_training_lowers_the_loss_and_is_reproducible(device, batching):
    graph = small_graphs()["miserables"]
    first, history = _train(graph, seed=3, device=device, batching=batching)
    again, history_again = _train(graph, seed=3, device=device, batching=batching)
    other, _ = _train(graph, seed=4, device=device, batching=batching)
    assert history[-1] < history[0]
    assert history == history_again
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_the_authors_batches_are_another_training_and_keep_the_uniform_noise():
    graph = small_graphs()["miserables"]
    walks, _ = _train(graph, seed=3, device=torch.device("cpu"))
    buckets, _ = _train(graph, seed=3, device=torch.device("cpu"), batching="buckets")
    assert not np.allclose(walks, buckets)
    settings = dict(epochs=1, batch_size=100, lr=0.1, negatives=2, window=2, device=torch.device("cpu"), seed=0)
    with pytest.raises(ConfigError, match=r"trainer.batching='pairs' is not one of walks, buckets"):
        SkipGramTrainer(**settings, batching="pairs")
    with pytest.raises(ConfigError, match=r"trainer.batching=buckets draws its negatives uniformly"):
        SkipGramTrainer(**settings, batching="buckets", noise=np.ones(graph.vcount()))


def test_a_diverged_training_is_one_line_naming_the_learning_rate():
    """A loss that is no number leaves W no embedding: the run stops there, not in the task's NaN error."""
    neighbours = CSRGraph.from_igraph(small_graphs()["zachary"])
    trainer = SkipGramTrainer(2, 200, 1e30, 2, 2, torch.device("cpu"), seed=0, progress=False)
    diverged = r"^training diverged in epoch 1 \(loss (nan|inf)\): lower trainer.lr=1e\+30$"
    with pytest.raises(ConfigError, match=diverged):
        trainer.fit(FreeEmbedding(34, 4), lambda rng: epoch_walks(neighbours, 1, 10, rng))
    pretrain = SkipGramTrainer(
        2, 200, 1e30, 2, 2, torch.device("cpu"), seed=0, progress=False, section="trainer.pretrain"
    )
    with pytest.raises(ConfigError, match=r"lower trainer.pretrain.lr=1e\+30$"):  # PPI's pre-training: its own key
        pretrain.fit(FreeEmbedding(34, 4), lambda rng: epoch_walks(neighbours, 1, 10, rng))


def test_a_training_that_ends_far_above_chance_is_refused_as_diverged():
    """A learning rate far too high can leave the loss finite and the embeddings of no use: a last epoch's loss a
    hundred times that of embeddings that know nothing ((1 + z) ln 2 = 2.08 here) fails the run, which would otherwise
    finish among a table's seeds; a sane rate trains as before."""
    neighbours = CSRGraph.from_igraph(small_graphs()["zachary"])
    settings = dict(batch_size=200, negatives=2, window=2, device=torch.device("cpu"), seed=0, progress=False)
    history = SkipGramTrainer(2, lr=0.05, **settings).fit(
        FreeEmbedding(34, 4), lambda rng: epoch_walks(neighbours, 1, 10, rng)
    )
    assert history[-1] < 2.08
    far = r"^training diverged: the last epoch's loss, \S+, is over 100 times what embeddings that know nothing score"
    with pytest.raises(ConfigError, match=far + r" \(2.08\): lower trainer.lr=1e\+09$"):
        SkipGramTrainer(2, lr=1e9, **settings).fit(
            FreeEmbedding(34, 4), lambda rng: epoch_walks(neighbours, 1, 10, rng)
        )


@pytest.mark.parametrize("distinct", [False, True], ids=["nodes", "distinct rows"])
@pytest.mark.parametrize(
    "pairs, hubs",
    [(5, 0), (60, 0), (600, 0), (6000, 0), (600, 3)],
    ids=["a row per id", "every node's table", "dots from the Gram", "every two rows", "a block of hot rows"],
)
def test_the_authors_step_takes_the_gradient_of_their_mean_binary_cross_entropy(layout, device, pairs, hubs, distinct):
    """trainer.batching=buckets: W and the logit's scale and bias get autograd's gradient of the batch's mean binary
    cross-entropy through e = X W, whether the ids repeat (every node's table, each row's entries summed; with enough
    pairs the dots from the table's Gram matrix; with more pairs than the table has pairs of rows, the gradient too
    through the matrices of every two rows; on the CPU, where a few hubs are most ends, through the block of their
    rows' products with every row, the pairs of two other rows gathered) or not, and whether the pairs are of nodes
    or of their distinct feature rows (52 of 77 nodes' rows here), as the trainer scores them."""
    graph = small_graphs()["miserables"]
    features = IGELEncoder(2).fit_transform(graph)
    model = IGELEmbedding(features, dim=4).to(device)
    scored, rows = model.by_distinct_rows() if distinct else (model, np.arange(77))
    settings = dict(seed=0, progress=False, logit_init="uniform", batching="buckets")
    trainer = SkipGramTrainer(1, 100, 0.1, 2, 2, device, **settings)
    step = _SkipGramStep(trainer, scored)
    taken = []
    step.optimiser = SimpleNamespace(step=taken.append)  # what Adam is handed
    generator = torch.Generator().manual_seed(pairs)
    ids = torch.randint(77, (2, pairs), generator=generator)
    if hubs:  # nine in ten ends are one of the hubs (nodes 11, 22, ...): their rows are hot, the others are not
        hub = torch.rand(2, pairs, generator=generator) < 0.9
        ids = torch.where(hub, 11 * (1 + torch.randint(hubs, (2, pairs), generator=generator)), ids)
    targets, others = ids
    labels = (torch.rand(pairs, generator=generator) < 0.3).double()
    scored_ids = [torch.as_tensor(rows)[ids].to(device) for ids in (targets, others)]
    step.pair_batch(*scored_ids, labels.float().to(device))
    assert step.hot is not None or not hubs or device.type != "cpu"  # the hubs' case takes the block
    weight = model.weight.detach().cpu().double().requires_grad_()
    affine = step.affine.detach().cpu().double().requires_grad_()
    embeddings = torch.as_tensor(features.toarray(), dtype=torch.float64) @ weight
    logit = (embeddings[targets] * embeddings[others]).sum(1) * affine[0] + affine[1]
    loss = F.binary_cross_entropy_with_logits(logit, labels)
    loss.backward()
    (d_weight, d_affine) = taken[0]
    torch.testing.assert_close(d_weight.cpu().double(), weight.grad, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(d_affine.cpu().double(), affine.grad, rtol=1e-4, atol=1e-7)
    assert step.mean_loss() == pytest.approx(loss.item() * pairs / labels.sum().item(), rel=1e-5)


def test_distinct_rows_embed_every_node_with_the_same_w(layout, device):
    features = IGELEncoder(1).fit_transform(small_graphs()["miserables"])
    model = IGELEmbedding(features, dim=4).to(device)
    dense = features.toarray()
    np.testing.assert_array_equal(model.feature_matrix().toarray(), dense)  # X, from the layer's buffers
    distinct, rows = model.by_distinct_rows()
    assert distinct.weight is model.weight and distinct.n_nodes == len(np.unique(dense, axis=0)) == 36
    np.testing.assert_array_equal(dense[np.unique(rows, return_index=True)[1]][rows], dense)  # a node's row is its own
    torch.testing.assert_close(distinct(torch.as_tensor(rows, device=device)), model.all_nodes())


@pytest.mark.parametrize("batching", ["walks", "buckets"])
def test_training_over_the_columns_in_use_leaves_w_as_training_over_all_of_them(layout, device, batching, monkeypatch):
    """The trainer trains a layer over the columns of X that some node has (IGELEmbedding.over_columns_in_use: 1,904 of
    Facebook's 9,414) and writes their rows of W back: W must come out bit for bit as training over every column
    leaves it, the other rows as they were. Only rows of whole vectors of Adam's (d = 16 here, not 30) are dropped."""
    graph = small_graphs()["miserables"]
    features = IGELEncoder(2).fit_transform(graph)
    in_use = np.unique(features.indices[features.data != 0])
    unused = np.setdiff1d(np.arange(features.shape[1]), in_use)
    model = IGELEmbedding(features, dim=16)
    with model.over_columns_in_use() as layer:
        assert layer is model if layout == "dense" else layer.weight.shape == (len(in_use), 16) and len(unused) > 0
        if layout != "dense":
            torch.testing.assert_close(layer.all_nodes(), model.all_nodes(), rtol=0, atol=0)
    model = IGELEmbedding(features, dim=30)
    with model.over_columns_in_use() as layer:
        assert layer is model
    csr = CSRGraph.from_igraph(graph)

    def trained() -> torch.Tensor:
        torch.manual_seed(0)
        model = IGELEmbedding(features, dim=16)
        with torch.no_grad():
            model.weight[unused] = 0.5  # rows no node has: no gradient ever moves them
        trainer = SkipGramTrainer(2, 2000, 0.05, 5, 3, device, seed=1, progress=False, batching=batching)
        trainer.fit(model, lambda rng: epoch_walks(csr, 2, 20, rng, walks_per_chunk=50))
        return model.weight.detach()

    over_columns_in_use = trained()
    monkeypatch.setattr(IGELEmbedding, "over_columns_in_use", lambda self: nullcontext(self))
    over_every_column = trained()
    if device.type == "cuda" and layout != "dense":  # cuSPARSE splits Xᵀ @ grad by its rows: a narrower Xᵀ rounds apart
        torch.testing.assert_close(over_columns_in_use, over_every_column, rtol=1e-4, atol=1e-4)
    else:
        assert torch.equal(over_columns_in_use, over_every_column)
    assert torch.all(over_columns_in_use[torch.as_tensor(unused)] == 0.5)
    torch.manual_seed(0)
    start = IGELEmbedding(features, dim=16).weight.detach()[torch.as_tensor(in_use)]
    assert not torch.equal(over_columns_in_use[torch.as_tensor(in_use)].cpu(), start)  # trained


def test_the_authors_batches_advance_the_progress_bar_by_whole_walks():
    walks = epoch_walks(CSRGraph.from_igraph(small_graphs()["miserables"]), 1, 20, np.random.default_rng(0))
    trainer = SkipGramTrainer(1, 100, 0.1, 2, 2, torch.device("cpu"), seed=0, progress=False, batching="buckets")
    step = _SkipGramStep(trainer, FreeEmbedding(77, 4))
    shares = [share for _, share in trainer._buckets(walks, 77, np.random.default_rng(1), step)]
    assert len(shares) > 77 and all(isinstance(share, int) for share in shares) and sum(shares) == 77


def test_the_authors_batches_counted_per_cell_train_as_the_dealt_pairs(layout, device, monkeypatch):
    """Where the step scores every batch of an epoch from the Gram matrix of the whole table (36 distinct rows here),
    it takes each batch as its pairs counted per cell of it (AuthorsPairs.by_cell), never dealt: W and the losses must
    come out bit for bit as from the dealt pairs. A batch too small for the Gram matrix (the last) has them dealt."""
    graph = small_graphs()["miserables"]
    csr = CSRGraph.from_igraph(graph)
    features = IGELEncoder(1).fit_transform(graph)
    settings = dict(progress=False, batching="buckets", logit_init="uniform")

    scored, rows = IGELEmbedding(features, dim=8).to(device).by_distinct_rows()
    walks = np.concatenate(list(epoch_walks(csr, 2, 20, np.random.default_rng(0))))
    pairs = AuthorsPairs.of_walks(walks, 3, 5, 77, np.random.default_rng(1), labels=rows)

    def batches(batch_size: int) -> list:
        trainer = SkipGramTrainer(1, batch_size, 0.05, 5, 3, device, seed=1, **settings)
        return list(_SkipGramStep(trainer, scored).pair_batches(pairs))

    counted = batches(2000)
    assert len(counted) == pairs.n_batches(2000) and all(isinstance(batch, _CellBatch) for batch in counted)
    fewest = scored.n_nodes**2 // RowPairs.GRAM_DOTS  # a batch of fewer pairs is not scored from the Gram matrix
    small = next(size for size in range(2000, 3000) if 0 < pairs.others.size % size < fewest)
    assert all(isinstance(batch, tuple) for batch in batches(small))

    def trained() -> tuple[torch.Tensor, list[float]]:
        seed_everything(0)
        model = IGELEmbedding(features, dim=8)
        trainer = SkipGramTrainer(2, 2000, 0.05, 5, 3, device, seed=1, **settings)
        history = trainer.fit(model, lambda rng: epoch_walks(csr, 2, 20, rng, walks_per_chunk=50))
        return model.weight.detach().cpu(), history

    by_cell = trained()
    monkeypatch.setattr(_SkipGramStep, "pair_batches", _SkipGramStep._dealt_batches)
    dealt = trained()
    assert torch.equal(by_cell[0], dealt[0]) and by_cell[1] == dealt[1]


def test_an_epoch_stopped_by_an_error_closes_its_progress_bar_first(capsys):
    """An interrupt (or an out-of-memory error) in an epoch's walks: the bar ends its line before the error goes up, so
    the command's one-line message is not written on the end of the bar, with the bar drawn again below it."""
    csr = CSRGraph.from_igraph(small_graphs()["miserables"])

    def epoch_walks_interrupted(rng):
        yield from epoch_walks(csr, 1, 20, rng, walks_per_chunk=10)
        raise KeyboardInterrupt

    trainer = SkipGramTrainer(1, 200, 0.1, 2, 2, torch.device("cpu"), seed=0, progress=True)
    try:
        trainer.fit(FreeEmbedding(77, 4), epoch_walks_interrupted, walks_per_epoch=77)
    except KeyboardInterrupt:  # read while the error is alive, as a command prints its line
        bar = capsys.readouterr().err
    assert "epoch 1/1" in bar and bar.endswith("\n")


def test_walks_drawn_on_the_device_train_alike(device):
    graph = small_graphs()["miserables"]
    csr = CSRGraph.from_igraph(graph)

    def train(seed):
        seed_everything(seed)
        model = IGELEmbedding(IGELEncoder(1).fit_transform(graph), dim=8)
        trainer = SkipGramTrainer(3, 2000, 0.05, 5, 3, device, seed=seed, progress=False)
        walker = DeviceWalker(csr, device, seed)
        return trainer.fit(model, lambda rng: walker.epoch(2, 20, walks_per_chunk=50)), embed_all(model, device)

    (history, first), (_, again) = train(3), train(3)
    assert history[-1] < history[0]
    np.testing.assert_array_equal(first, again)


def test_device_walks_draw_another_stream_than_the_trainers_negatives(device):
    """The walker and the trainer's step, which draws the negatives, are seeded with the run's seed on one device: two
    generators of one seed gave the same bits, the first batch's negatives the very draws of its walks' steps."""
    graph = small_graphs()["zachary"]
    trainer = SkipGramTrainer(1, 100, 0.1, 2, 2, device, seed=7, progress=False)
    negatives = _SkipGramStep(trainer, IGELEmbedding(IGELEncoder(1).fit_transform(graph), dim=8).to(device)).generator
    walker = DeviceWalker(CSRGraph.from_igraph(graph), device, 7).generator
    draws = [torch.rand(1000, generator=generator, device=device) for generator in (walker, negatives)]
    assert not torch.equal(*draws)


def test_batch_scale_takes_larger_batches_at_the_same_learning_rate():
    cpu = torch.device("cpu")
    authors = SkipGramTrainer(1, batch_size=250_000, lr=0.01, negatives=9, window=8, device=cpu, seed=0)
    scaled = SkipGramTrainer(1, 250_000, 0.01, 9, 8, cpu, seed=0, batch_scale=16)
    assert scaled.walks_per_batch(150) == 16 * 250_000 // 23_280 + 1 == 172
    assert scaled.lr == authors.lr
    with pytest.raises(ValueError, match="trainer.batch_scale"):
        SkipGramTrainer(1, 250_000, 0.01, 9, 8, cpu, seed=0, batch_scale=0)


def test_the_learned_logit_scale_and_bias_are_kept():
    graph = small_graphs()["zachary"]
    csr = CSRGraph.from_igraph(graph)
    model = IGELEmbedding(IGELEncoder(1).fit_transform(graph), dim=4)
    trainer = SkipGramTrainer(2, 2000, 0.05, 5, 3, torch.device("cpu"), seed=0, progress=False)
    trainer.fit(model, lambda rng: epoch_walks(csr, 1, 10, rng))
    assert trainer.affine.shape == (2,) and not torch.equal(trainer.affine, torch.tensor([1.0, 0.0]))
    paper = SkipGramTrainer(2, 2000, 0.05, 5, 3, torch.device("cpu"), seed=0, progress=False, logit_affine=False)
    paper.fit(model, lambda rng: epoch_walks(csr, 1, 10, rng))
    assert paper.affine is None


def test_a_batch_holds_whole_walks_worth_batch_size_pairs():
    trainer = SkipGramTrainer(1, batch_size=250_000, lr=0.1, negatives=9, window=8, device=torch.device("cpu"), seed=0)
    # a walk of 150 nodes holds 2 (142 + ... + 149) = 2328 positive pairs, 23,280 training pairs with negatives
    assert trainer.walks_per_batch(150) == 11
    assert trainer.walks_per_batch(2) == 250_000 // 20


def test_compile_auto_compiles_a_long_run_on_a_cpu_with_a_compiler(monkeypatch, tmp_path):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert compiles(True, 10, cpu) and not compiles(False, 10**6, cpu)  # as set, whatever the run
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    assert not compiles("auto", 10**6, cpu)  # a machine without a C++ compiler runs eagerly
    compiler = tmp_path / "c++"
    compiler.write_text("#!/bin/sh\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    assert compiles("auto", COMPILE_FROM_STEPS, cpu)
    assert not compiles("auto", COMPILE_FROM_STEPS - 1, cpu)  # compiling would cost more than it saves
    assert not compiles("auto", 10**6, cuda)  # a GPU replays its steps from CUDA graphs instead


def test_free_embedding_is_a_lookup():
    model = FreeEmbedding(10, 3)
    torch.testing.assert_close(model(torch.tensor([2, 7])), model.table.weight[[2, 7]])


def test_a_larger_batch_never_takes_a_run_below_min_steps():
    assert batch_scale_for(16, 11_500) == 11  # AstroPh's 8 epochs: 11 times larger batches keep 1,045 steps
    assert batch_scale_for(4, 3_670) == 3  # Facebook's 10 epochs
    assert batch_scale_for(4, 770) == 1  # the Les Misérables clustering keeps the authors' batches
    assert batch_scale_for(4, 100_000) == 4


def test_a_capped_batch_scale_says_so(compose_config, caplog):
    """trainer.batch_scale=4 on the Les Misérables clustering (770 steps): the run keeps the authors' batches, and its
    log says that the setting was capped, not that batches are 1 times larger."""
    from igel_exp.pipelines.common import skipgram_trainer

    settings = compose_config("trainer.batch_scale=4").trainer
    graph = CSRGraph.from_igraph(small_graphs()["miserables"])
    with caplog.at_level(logging.INFO, logger="igel_exp.pipelines.common"):
        trainer = skipgram_trainer(settings, graph, torch.device("cpu"), seed=0, progress=False)
    assert trainer.batch_size == settings.batch_size
    [line] = [record for record in caplog.records if "batch_scale" in record.message]
    assert line.levelno == logging.WARNING and line.message.startswith("trainer.batch_scale=4 capped to 1: larger")


def test_more_threads_than_cpus_are_the_cpus_with_a_warning(caplog):
    before = torch.get_num_threads()
    try:
        with caplog.at_level(logging.WARNING, logger="igel_exp.training"):
            set_threads(100_000)
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        assert torch.get_num_threads() == cpus
        assert caplog.messages == [f"threads=100000 is more than this machine's {cpus} CPUs: using {cpus}"]
    finally:
        torch.set_num_threads(before)


def test_threads_limit_the_blas_of_numpy_and_scikit_learn_too():
    """threads=1 is one thread for the evaluators' BLAS too (numpy's OpenBLAS under scikit-learn's logistic regression):
    it ran one per core, so a parallel sweep's jobs at threads=1 contended for the cores."""
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS loaded
    before, original = torch.get_num_threads(), threadpoolctl.threadpool_limits(limits=None)
    try:
        set_threads(1)
        blas = [pool for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"]
        assert blas and all(pool["num_threads"] == 1 for pool in blas)
    finally:
        original.restore_original_limits()
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_distinct_ids_are_torch_uniques(dtype):
    generator = torch.Generator().manual_seed(0)
    for n_ids, count in [(1, 3), (50, 10), (18_772, 13_000)]:
        ids = torch.randint(n_ids, (count,), generator=generator, dtype=dtype)
        rows, index = distinct_ids(ids, n_ids)
        expected_rows, expected_index = torch.unique(ids, return_inverse=True)
        assert rows.dtype == expected_rows.dtype and torch.equal(rows, expected_rows)
        assert index.dtype == expected_index.dtype and torch.equal(index, expected_index)
