"""protocol=: the authors' code path as ordinary switches of the boxes, its refusal where it is not defined, the
identity of faithful runs (unchanged by the keys it added), and each switch on small real graphs and real data."""

import logging
import math
import subprocess
import sys
from collections import Counter

import igraph as ig
import mlflow
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from igel_exp import pipelines
from igel_exp import protocol as protocols
from igel_exp.data import DataContext, load_dataset
from igel_exp.encoding import IGELEncoder
from igel_exp.errors import ConfigError
from igel_exp.identity import config_hash
from igel_exp.models import FreeEmbedding, IGELEmbedding, distance_scaled_weight, normal_weight
from igel_exp.pipelines.common import build_encoder, initialise_weight
from igel_exp.plan import default_experiments_dir, load_plan
from igel_exp.schema import shown_value
from igel_exp.tracking import PROTOCOL_TAG, flatten, tracked_run
from igel_exp.training import SkipGramTrainer
from igel_exp.walks import CSRGraph, epoch_walks

from conftest import small_graphs

# What protocol=authors sets per experiment (conf/specialise/protocol/), every other key as under faithful.
AUTHORS = {
    "clustering": {
        "dataset.bridge_stream": 1,
        "encoder.encoded_distance": 1,
        "encoder.weight_init": "distance_scaled",
        "encoder.weight_seed": 1,
        "trainer.logit_init": "uniform",
        "trainer.batching": "buckets",
        "trainer.walk_stream": 1,
        "task.score_neighbourhood": "closed",
        "task.centrality_ties": "bits",
    },
    "sister_cities": {
        "dataset.parallel_edges": True,
        "encoder.encoded_distance": 1,
        "encoder.weight_init": "distance_scaled",
        "encoder.weight_seed": 1,
        "trainer.logit_init": "uniform",
        "trainer.batching": "buckets",
        "trainer.walk_stream": 1,
        "task.score_neighbourhood": "closed",
        "task.centrality_ties": "bits",
        "task.cluster_members": "in_table",
        "task.kmeans_stream": 1,
        "task.ranking_graph": "directed",
    },
    # and the plain encoding of the paper's runs: relative degrees came to the authors' code after them
    "link_prediction": {
        "dataset.parallel_edges": True,
        "task.split": "read_back",
        "task.classifier": "adam_linear",
        "encoder.relative_degrees": False,
    },
}
# Hashes of faithful runs made before the protocol keys existed (HEAD f3ac0e9): they must still find their runs.
FAITHFUL_HASHES = {
    ("experiment=clustering", "encoder.distance=1", "seed=0"): "3485888182720f1f",
    ("experiment=clustering", "encoder.distance=2", "seed=0"): "49a3a1afce311990",
    ("experiment=sister_cities", "encoder.distance=2", "task.k=6", "seed=0"): "6b3b6722049e1536",
    ("experiment=sister_cities", "encoder.distance=1", "task.k=5", "seed=0"): "fed15c98c0819fe4",
    ("experiment=link_prediction", "dataset=facebook", "seed=0"): "f995c698420d1828",
    ("experiment=link_prediction", "dataset=astroph", "encoder=deepwalk", "seed=0"): "78bd708282d06686",
}


def value(config, dotted: str):
    node = config
    for key in dotted.split("."):
        node = node[key]
    return node


@pytest.mark.parametrize("experiment", sorted(AUTHORS))
def test_the_authors_protocol_sets_only_its_switches(compose_config, experiment):
    faithful, authors = (
        compose_config(f"experiment={experiment}"),
        compose_config(f"experiment={experiment}", "protocol=authors"),
    )
    assert (faithful.protocol, authors.protocol) == ("faithful", "authors")
    for key, expected in AUTHORS[experiment].items():
        assert value(authors, key) == expected, key
    plain = lambda config: flatten(dict(config))  # noqa: E731
    changed = {key for key, got in plain(authors).items() if plain(faithful).get(key) != got}
    assert changed <= {"protocol", *AUTHORS[experiment]}


@pytest.mark.parametrize("experiment", ["clustering", "sister_cities"])
def test_the_switches_of_igels_encoding_are_igels_only(compose_config, experiment):
    """A DeepWalk run of the authors' path takes its switches for every encoder, not IGEL's encoding cache, which it
    would log as settings it ignores."""
    authors = compose_config(f"experiment={experiment}", "protocol=authors", "encoder=deepwalk")
    assert authors.trainer.batching == "buckets"
    assert not {"encoded_distance", "weight_init", "weight_seed"} & set(authors.encoder)
    assert authors.task.get("kmeans_stream") is None  # the notebook's KMeans stream is that of IGEL's α
    assert authors.trainer.walk_stream is None  # and its walks those of IGEL's training


@pytest.mark.parametrize("overrides, expected", sorted(FAITHFUL_HASHES.items()))
def test_faithful_runs_keep_their_identity(compose_config, overrides, expected):
    assert config_hash(compose_config(*overrides)) == expected
    assert config_hash(compose_config(*overrides, "protocol=authors")) != expected


def test_a_protocol_without_switches_is_refused_before_any_run(compose_config, store_uri):
    config = compose_config("experiment=scalability", "protocol=authors", "dataset.num_nodes=64")
    with pytest.raises(ConfigError) as error:
        pipelines.run(config)
    message = str(error.value)
    assert message == (
        "protocol=authors is not defined for task=scalability on dataset=erdos_renyi; it is defined for"
        " experiment=clustering (dataset=miserables_cloned); experiment=link_prediction (dataset=astroph, facebook);"
        " experiment=sister_cities (dataset=sister_cities)"
    )
    client = mlflow.MlflowClient(store_uri)
    assert not client.search_runs([found.experiment_id for found in client.search_experiments()])  # no run made


# An override of a key that the protocol holds for the task and dataset: a run of neither path under its name
UNDONE = [
    (
        ["protocol=authors", "trainer.batching=walks"],
        "protocol=authors sets trainer.batching=buckets for task=clustering on dataset=miserables_cloned;"
        " trainer.batching=walks makes a run of neither path (or run protocol=faithful): leave it out",
    ),
    (
        ["protocol=authors", "encoder.weight_init=normal", "task.score_neighbourhood=open"],
        "protocol=authors sets encoder.weight_init=distance_scaled, task.score_neighbourhood=closed for"
        " task=clustering on dataset=miserables_cloned; encoder.weight_init=normal, task.score_neighbourhood=open makes"
        " a run of neither path (or run protocol=faithful): leave them out",
    ),
    (
        ["experiment=link_prediction", "dataset=astroph", "protocol=authors", "dataset.parallel_edges=false"],
        "protocol=authors sets dataset.parallel_edges=true for task=link_prediction on dataset=astroph;"
        " dataset.parallel_edges=false makes",
    ),
    (
        ["experiment=sister_cities", "protocol=authors", "task.ranking_graph=undirected"],
        "protocol=authors sets task.ranking_graph=directed for task=sister_cities on dataset=sister_cities;",
    ),
    # the mirror: one of the authors' switches under the faithful protocol
    (
        ["trainer.batching=buckets"],
        "protocol=faithful keeps trainer.batching=walks for task=clustering on dataset=miserables_cloned, which"
        " protocol=authors switches; trainer.batching=buckets makes a run of neither path (or run protocol=authors):"
        " leave it out",
    ),
    (
        ["experiment=link_prediction", "dataset=facebook", "dataset.parallel_edges=true"],
        "protocol=faithful keeps dataset.parallel_edges=false for task=link_prediction on dataset=facebook, which"
        " protocol=authors switches; dataset.parallel_edges=true makes a run of neither path (or run"
        " protocol=authors): leave it out",
    ),
    (  # neither protocol's value: no protocol to run instead
        ["encoder.distance=3", "encoder.encoded_distance=2"],
        "protocol=faithful keeps encoder.encoded_distance=null for task=clustering on dataset=miserables_cloned, which"
        " protocol=authors switches; encoder.encoded_distance=2 makes a run of neither path: leave it out",
    ),
]
# Overrides the protocols leave free: keys they do not hold, keys of another encoder, a graph with no authors' path
FREE = [
    ["protocol=authors", "encoder.distance=3", "trainer.lr=0.2"],
    ["experiment=link_prediction", "dataset=astroph", "protocol=authors", "trainer.batching=buckets"],
    ["experiment=sister_cities", "protocol=authors", "encoder=deepwalk"],
    ["experiment=sister_cities", "task.ranking_graph=undirected"],  # both paths hold directed: no switch of faithful's
    ["dataset=miserables", "trainer.batching=buckets", "task.score_neighbourhood=closed"],
    ["experiment=link_prediction", "dataset=edgelist", "dataset.path=g.txt", "dataset.parallel_edges=true"],
]


@pytest.mark.parametrize("overrides, line", UNDONE)
def test_an_override_that_undoes_a_protocols_switch_is_refused_by_tables_and_named_by_runs(
    compose_config, overrides, line
):
    """protocol=authors with trainer.batching=walks ran, tagged and named authors: a run of neither path, which a table
    swept with that override counted in the authors' column. So did protocol=faithful with one of the authors' switches.
    A table's jobs refuse it (check_switches; igel-reproduce's test below); a run says what it ran (label: its tag and
    name, test_igel_run_names_and_tags_an_ablation_by_what_it_ran), an ablation a researcher runs on purpose."""
    config = compose_config(*overrides)
    pipelines.check(config)  # igel-run runs it
    with pytest.raises(ConfigError) as error:
        protocols.check_switches(config)
    assert str(error.value).startswith(line)
    changed = protocols.overridden(config)
    assert changed and protocols.label(config) == (
        f"{config.protocol} with " + ", ".join(f"{key}={shown_value(value)}" for key, value in changed.items())
    )


@pytest.mark.parametrize("overrides", FREE)
def test_overrides_of_keys_the_protocol_does_not_hold_are_free(compose_config, overrides):
    config = compose_config(*overrides)
    protocols.check_switches(config)
    assert protocols.label(config) == config.protocol


def test_igel_reproduce_refuses_an_override_that_undoes_a_switch_of_its_jobs():
    path = default_experiments_dir() / "miserables_correlations.yaml"
    with pytest.raises(
        ConfigError,
        match=r"^miserables_correlations.yaml with .*protocol=authors.*: protocol=authors"
        r" sets trainer.batching=buckets for task=clustering",
    ):
        load_plan(path, "quick", ["trainer.batching=walks"])


@pytest.mark.parametrize("task, dataset", sorted(protocols.defined("authors")))
def test_the_faithful_value_of_each_switch_is_the_faithful_paths(compose_config, task, dataset):
    """check_switches holds a switch key under protocol=faithful at identity.ADDED_DEFAULTS' value: the value the
    faithful path composes, for every encoder."""
    for encoder in ("igel", "deepwalk"):
        config = compose_config(f"experiment={task}", f"dataset={dataset}", f"encoder={encoder}")
        kept = protocols.held(config)
        assert kept, (task, dataset, encoder)
        for key, (value, _) in kept.items():
            assert OmegaConf.select(config, key, default=value) == value, key


@pytest.mark.slow
def test_igel_run_refuses_it_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "igel_exp.cli", "experiment=ppi", "protocol=authors"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("igel-run: error: protocol=authors is not defined for task=node_classification on")
    assert not (tmp_path / "mlflow.db").exists()


def test_runs_log_their_protocol_as_a_param_and_a_tag(compose_config, store_uri):
    for protocol in ("faithful", "authors"):
        with tracked_run(compose_config(f"protocol={protocol}"), "toy") as logger:
            pass
        run = mlflow.get_run(logger.run_id)
        assert (run.data.params["protocol"], run.data.tags[PROTOCOL_TAG]) == (protocol, protocol)


def test_igel_run_names_and_tags_an_ablation_by_what_it_ran(compose_config, store_uri, caplog):
    """An override of a protocol's switch (the faithful path on Sister Cities' multigraph, the ablation that ruled its
    parallel edges out) runs, and its tag, name and a warning say what ran (it was tagged and named as faithful's)."""
    config = compose_config("experiment=sister_cities", "dataset.parallel_edges=true")
    with caplog.at_level(logging.WARNING), tracked_run(config, "toy") as logger:
        pass
    run = mlflow.get_run(logger.run_id)
    ran = "faithful with dataset.parallel_edges=true"
    assert (run.data.params["protocol"], run.data.tags[PROTOCOL_TAG]) == ("faithful", ran)
    assert run.info.run_name == f"sister_cities α=4 {ran} seed=0"
    assert f"makes a run of neither path (or run protocol=authors): the run is tagged and named '{ran}'" in caplog.text


# --- the switches -------------------------------------------------------------------------------------------


def authors_mapping_matrix(distance: int, max_degree_bound: int, matrix_size: int) -> torch.Tensor:
    """nur-ag/IGEL src/structural.py@f1fd43d, StructuralMapper.mapping_matrix, line by line (CPU)."""
    total_elements = (distance + 1) * max_degree_bound
    matrix = torch.rand(total_elements, matrix_size)
    matrix = (matrix - 0.5) / math.sqrt(matrix_size)
    for i in range(1, total_elements):
        degree = i % max_degree_bound
        distance_i = i // max_degree_bound
        matrix[i] *= (math.exp(distance_i) / math.log(degree + 1)) if degree else 0.0
    return (matrix - matrix.mean(axis=0)) / matrix.std(axis=0)


@pytest.mark.parametrize("distance, encoded", [(1, 1), (3, 1), (4, 2)])
def test_distance_scaled_weight_is_the_authors_mapping_matrix(distance, encoded):
    torch.manual_seed(7)
    expected = authors_mapping_matrix(distance, 13, 5)
    torch.manual_seed(7)
    got = distance_scaled_weight(distance, 12, 5, encoded)
    np.testing.assert_allclose(got.numpy(), expected[: (encoded + 1) * 13].numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ConfigError, match=r"encoder.encoded_distance \(3\) ≤ encoder.distance \(2\)"):
        distance_scaled_weight(2, 12, 5, 3)


def test_alpha_one_features_under_a_larger_alpha_get_their_rows_of_its_matrix(compose_config):
    """encoded_distance=1 under distance=3: the α = 1 encoding, W the α = 1 rows of the α = 3 matrix."""
    config = compose_config("protocol=authors", "encoder.distance=3")
    graph = small_graphs()["zachary"]
    encoder = build_encoder(config.encoder, False)
    features = encoder.fit_transform(graph)
    assert encoder.distance == 1 and features.shape[1] == 2 * 18
    torch.manual_seed(0)
    model = IGELEmbedding(features, 4)
    initialise_weight(model, config.encoder, encoder, seed=1)
    after = torch.rand(2)  # the logit's scale and bias are the next draws, as the authors' nn.Linear(1, 1)'s
    torch.manual_seed(1)  # the authors' set_seed(1) before building the model
    expected = authors_mapping_matrix(3, 18, 4)[: 2 * 18]
    assert torch.equal(after, torch.rand(2))
    seen = np.bincount(features.indices, minlength=36) > 0
    np.testing.assert_allclose(model.weight.detach().numpy()[seen], expected.numpy()[seen], rtol=1e-5, atol=1e-6)
    assert not model.weight.detach().numpy()[~seen].any()  # structures the graph lacks stay zero


def test_the_weight_seed_starts_every_run_where_its_seed_does(compose_config):
    """encoder.weight_seed: W and the logit's scale and bias (torch's next draws) alike whatever the run's seed."""
    graph = small_graphs()["zachary"]

    def start(*overrides: str, seed: int) -> tuple[np.ndarray, torch.Tensor]:
        config = compose_config("protocol=authors", "encoder.distance=2", *overrides)
        encoder = build_encoder(config.encoder, False)
        model = IGELEmbedding(encoder.fit_transform(graph), 4)
        initialise_weight(model, config.encoder, encoder, seed=seed)
        return model.weight.detach().numpy().copy(), torch.rand(2)

    (w0, logit0), (w5, logit5) = start(seed=0), start(seed=5)
    np.testing.assert_array_equal(w0, w5)
    assert torch.equal(logit0, logit5)
    unseeded = [start("encoder.weight_seed=null", seed=seed)[0] for seed in (1, 5)]
    np.testing.assert_array_equal(unseeded[0], w0)  # the authors' seed is 1
    assert not np.array_equal(unseeded[1], w0)
    (n0, _), (n5, _) = (start("encoder.weight_init=normal", seed=seed) for seed in (0, 5))  # a normal W drawn anew
    np.testing.assert_array_equal(n0, n5)
    torch.manual_seed(1)
    seen = n0.any(axis=1)
    np.testing.assert_array_equal(n0[seen], normal_weight(*n0.shape).numpy()[seen])  # the model's own, from seed 1


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["encoder=deepwalk", "task.kmeans_stream=1"],
            "task.kmeans_stream=1 replays the authors' notebook's KMeans fits of IGEL's",
        ),
        (["encoder.distance=5"], "α = 1..4 with k = 1..15: encoder.distance=5, k=6 was none of them"),
        (["trainer.walks_per_node=2"], "trainer.walk_stream=1 replays the authors' walks, one uniform walk per node"),
        (
            ["encoder=node2vec", "trainer.walk_stream=1"],
            r"uniform steps \(got 1, encoder.return_p=1, encoder.inout_q=0.5\)",
        ),
    ],
)
def test_the_authors_draws_outside_what_they_drew_are_refused_before_any_run(
    compose_config, store_uri, overrides, message
):
    config = compose_config("experiment=sister_cities", "protocol=authors", *overrides)
    with pytest.raises(ConfigError, match=message):
        pipelines.run(config)
    client = mlflow.MlflowClient(store_uri)
    assert not client.search_runs([found.experiment_id for found in client.search_experiments()])  # no run made


def first_epoch_loss(logit_init: str, torch_seed: int) -> float:
    """One epoch of a tiny learning rate from fixed embeddings: the loss shows where the logit's a and b started."""
    graph = small_graphs()["zachary"]
    neighbours = CSRGraph.from_igraph(graph)
    model = FreeEmbedding(graph.vcount(), 4)
    with torch.no_grad():
        model.table.weight.copy_(torch.linspace(-1, 1, graph.vcount() * 4).reshape(-1, 4))
    trainer = SkipGramTrainer(1, 2000, 1e-9, 2, 2, torch.device("cpu"), seed=0, logit_init=logit_init, progress=False)
    torch.manual_seed(torch_seed)
    walks = lambda rng: epoch_walks(neighbours, 1, 10, rng)  # noqa: E731
    return trainer.fit(model, walks)[0]


def test_the_logit_starts_fixed_or_uniform_from_torch_seed():
    fixed = {first_epoch_loss("fixed", seed) for seed in (1, 2)}
    uniform = [first_epoch_loss("uniform", seed) for seed in (1, 2, 1)]
    assert len(fixed) == 1  # a = 1, b = 0 whatever torch's generator holds
    assert uniform[0] == uniform[2] != uniform[1] and fixed.isdisjoint(uniform)
    with pytest.raises(ConfigError, match="trainer.logit_init='normal' is not one of fixed, uniform"):
        SkipGramTrainer(1, 10, 0.1, 1, 1, torch.device("cpu"), seed=0, logit_init="normal")


def test_without_the_affine_logit_its_start_is_no_setting():
    """logit_affine=false is σ(e_t·e_o): a uniform start would be a fixed random scale and bias in every logit."""
    losses = set()
    for logit_init in ("fixed", "uniform"):
        model = FreeEmbedding(34, 4)
        with torch.no_grad():
            model.table.weight.copy_(torch.linspace(-1, 1, 34 * 4).reshape(-1, 4))
        trainer = SkipGramTrainer(1, 2000, 1e-9, 2, 2, torch.device("cpu"), seed=0, logit_init=logit_init,
                                  logit_affine=False, progress=False)  # fmt: skip
        neighbours = CSRGraph.from_igraph(small_graphs()["zachary"])
        losses.add(trainer.fit(model, lambda rng: epoch_walks(neighbours, 1, 10, rng))[0])  # noqa: B023
    assert len(losses) == 1


def induced_multigraph_counts(graph: ig.Graph, distance: int, width: int) -> list[Counter]:
    """The authors' encoding (src/structural.py@f1fd43d compute_degree_mapping, use_distances): per node, the
    (distance, degree) pairs of its ego graph as igraph's induced subgraph of the multigraph counts them."""
    result = []
    for v, ball in enumerate(graph.neighborhood(range(graph.vcount()), order=distance)):
        ego = graph.induced_subgraph(ball)
        centre = sorted(ball).index(v)
        hops = [d[0] for d in ego.distances(target=centre)]
        result.append(Counter(h * width + min(d, width - 1) for h, d in zip(hops, ego.degree(), strict=True)))
    return result


def with_parallel_edges(graph: ig.Graph, seed: int) -> ig.Graph:
    edges = graph.get_edgelist()
    rng = np.random.default_rng(seed)
    extra = [edges[i] for i in rng.choice(len(edges), size=len(edges) // 2)]  # some twice or three times
    return ig.Graph(n=graph.vcount(), edges=[*edges, *extra])


@pytest.mark.parametrize("name", ["zachary", "miserables", "disconnected", "erdos_renyi"])
@pytest.mark.parametrize("distance", [1, 2, 3])
@pytest.mark.parametrize("on_ball", [False, True])
def test_parallel_edges_count_in_the_ego_graph_degrees(name, distance, on_ball, monkeypatch):
    if on_ball:  # every chunk works on the subgraph of its balls
        monkeypatch.setattr("igel_exp.encoding._LOCAL_ABOVE", 0)
        monkeypatch.setattr("igel_exp.encoding._LOCAL_SHARE", 1.0)
    graph = with_parallel_edges(small_graphs()[name], seed=distance)
    assert not graph.is_simple()
    encoder = IGELEncoder(distance, chunk_size=5).fit(graph)
    assert encoder.max_degree_ == max(graph.degree())
    counts = encoder.counts(graph)
    for v, expected in enumerate(induced_multigraph_counts(graph, distance, encoder.max_degree_ + 1)):
        row = counts[v]
        assert dict(zip(row.indices.tolist(), row.data.tolist(), strict=True)) == dict(expected)


@pytest.mark.data
def test_real_sister_cities_as_the_authors_read_it(data_root):
    """19,761 edges; at α = 1, 182 groups of nodes share an encoding (11,015 nodes), and real α = 2 encodings
    split 178 of them: the authors' label columns, which split none at any α, were made from α = 1 encodings."""
    context = DataContext(data_root, download=False, seed=0)
    graph = load_dataset({"name": "sister_cities", "parallel_edges": True}, context).graph
    assert (graph.vcount(), graph.ecount()) == (11618, 19761)
    rows = [IGELEncoder(alpha).fit(graph).counts(graph) for alpha in (1, 2)]
    keys = [[row[v].indices.tobytes() + row[v].data.tobytes() for v in range(graph.vcount())] for row in rows]
    groups: dict[bytes, list[int]] = {}
    for v, key in enumerate(keys[0]):
        groups.setdefault(key, []).append(v)
    shared = [members for members in groups.values() if len(members) > 1]
    assert (len(shared), sum(map(len, shared))) == (182, 11015)
    assert sum(len({keys[1][v] for v in members}) > 1 for members in shared) == 178
