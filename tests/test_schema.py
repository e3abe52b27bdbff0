"""The typed schema behind the config files: types and choices at composition, ranges before a run, one-line errors."""

import dataclasses
import logging

import pytest
import yaml
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from igel_exp import schema
from igel_exp.data.edgelist import NODE_ID_KINDS
from igel_exp.data.ppi import LAYOUTS
from igel_exp.encoding import NORMALISATIONS, TRANSFORMS
from igel_exp.errors import ConfigError
from igel_exp.identity import config_hash
from igel_exp.models import ACTIVATIONS
from igel_exp.tasks.capitals import RANKING_GRAPHS

from conftest import REPO


def test_every_file_of_a_group_names_its_schema_and_composes_typed(compose_config):
    for group, kinds in schema.SCHEMAS.items():
        for path in sorted((REPO / "conf" / group).glob("*.yaml")):
            [entry, self_entry] = yaml.safe_load(path.read_text())["defaults"]
            kind = entry.removeprefix(f"/schema/{group}/").removesuffix("@_here_")
            assert kind in kinds and self_entry == "_self_", path
            experiment = ["experiment=ppi"] if path.stem == "supervised" else []  # the default one sets skip-gram keys
            config = compose_config(*experiment, f"{group}={path.stem}")
            assert OmegaConf.get_type(config[group]) is kinds[kind], path
    assert OmegaConf.get_type(compose_config()) is schema.Config
    assert OmegaConf.get_type(compose_config("experiment=ppi").trainer.pretrain) is schema.Pretrain


def test_the_choices_are_those_the_components_accept():
    assert [member.value for member in schema.Transform] == list(TRANSFORMS)
    assert [member.value for member in schema.Normalise] == list(NORMALISATIONS)
    assert [member.value for member in schema.Activation] == list(ACTIVATIONS)
    assert [member.value for member in schema.PPILayout] == list(LAYOUTS)
    assert [member.value for member in schema.RankingGraph] == list(RANKING_GRAPHS)
    assert [member.value for member in schema.NodeIds] == list(NODE_ID_KINDS)


def test_the_schema_leaves_every_run_its_identity(compose_config):
    """The hashes of configs composed before the schema existed: runs already in a store keep being recognised."""
    assert config_hash(compose_config()) == "3485888182720f1f"
    assert config_hash(compose_config("experiment=scalability")) == "55a32d7b7a57bd0b"
    assert config_hash(compose_config("experiment=ppi")) == "195f6c585799e003"
    assert config_hash(compose_config("encoder=deepwalk")) == "18e996c8917d4872"
    assert compose_config("experiment=scalability").dataset.average_degree == 8  # an int stays an int
    assert schema.plain(compose_config()).encoder.transform == "log"  # choices reach the pipelines as strings


@pytest.mark.parametrize(
    "overrides, line",
    [
        (["trainer.lr=abc"], "trainer.lr=abc: expected a number"),
        (["seed=x"], "seed=x: expected an integer"),
        (["trainer.dim=1.5"], "trainer.dim=1.5: expected an integer"),
        (["progress=maybe"], "progress=maybe: expected true or false"),
        (["encoder.transform=sqrt"], "encoder.transform=sqrt: expected one of log, none"),
        (["trainer.noise=gaussian"], "trainer.noise=gaussian: expected one of uniform, degree"),
        (
            ["experiment=ppi", "trainer.activation=gelu"],
            "trainer.activation=gelu: expected one of elu, relu, tanh, linear",
        ),
        # the option as a user names it, and its settings (was "of SkipGramTrainer", the schema's class, alone)
        (["trainer.lrr=0.1"], "trainer.lrr is not a setting of trainer=skipgram (its settings: objective, device,"),
        (
            ["experiment=transfer_link_prediction", "task.source_overrides=5"],
            "task.source_overrides=5: expected a list, such as [a, b]",
        ),
        (
            ["experiment=transfer_link_prediction", "task.source_overrides={epochs:1}"],
            "task.source_overrides={epochs:1}: expected a list, such as [a, b]",
        ),
        (
            ["trainer=supervised"],
            "trainer.walk_length is not a setting of trainer=supervised (its settings: objective, device,",
        ),
        (["experiment=nope"], "In 'config': Could not find 'experiment/nope'; available: clustering, link_prediction"),
    ],
)
def test_a_wrong_type_or_choice_fails_while_composing_in_one_line(compose_config, overrides, line):
    with pytest.raises(ConfigCompositionException) as error:
        compose_config(*overrides)
    assert schema.describe(error.value).startswith(line)
    assert "\n" not in schema.describe(error.value)


@pytest.mark.parametrize(
    "overrides, line",
    [
        (["encoder.distance=-1"], "encoder.distance=-1: expected an integer ≥ 0"),
        (["trainer.epochs=0"], "trainer.epochs=0: expected an integer ≥ 1"),
        (["trainer.lr=0"], "trainer.lr=0.0: expected a number > 0"),
        (["threads=0"], "threads=0: expected an integer ≥ 1"),
        (["trainer.lr=inf"], "trainer.lr=inf: expected a finite number > 0"),
        (["experiment=scalability", "dataset.average_degree=inf"], "dataset.average_degree=inf: expected a finite"),
        (["encoder=node2vec", "encoder.return_p=1e4"], "encoder.return_p=10000.0: expected a number ≥ 0.01 and < 100"),
        (["trainer.walk_length=1"], "trainer.walk_length=1: expected an integer ≥ 2"),
        (["trainer.compile=1"], "trainer.compile=1: expected one of false, true, auto"),
        (["trainer.compile=yes"], "trainer.compile=yes: expected one of false, true, auto"),
        (["name="], "name=: expected one of the non-blank names"),
        ([f"name={'n' * 501}"], f"name={'n' * 501}: expected one of the non-blank names of at most 500 characters"),
        # blank where null picks a default: the default, unsaid (`data.root=$DIR` with $DIR unset)
        (["data.root="], "data.root=: expected one of the non-blank folders (null: $IGEL_DATA_DIR, else"),
        (["experiment=link_prediction", "task.split_cache=' '"], "task.split_cache= : expected one of the non-blank"),
        (["tracking.parent_run_id="], "tracking.parent_run_id=: expected one of the non-blank run ids"),
        (["task.objective="], "task.objective=: expected one of the non-blank metric names"),
        (["seed=4294967296"], "seed=4294967296: expected an integer ≥ 0 and < 4294967296"),
        # beyond 64 bits: inside every bound, then an OverflowError or TypeError traceback from numpy or torch
        (
            ["trainer.dim=100000000000000000000"],
            "trainer.dim=100000000000000000000: expected an integer ≥ 1 and ≤ 9223372036854775807 (64 bits)",
        ),
        (["trainer.walks_per_node=9223372036854775808"], "trainer.walks_per_node=9223372036854775808: expected an"),
        (["trainer.device=tpu"], "trainer.device=tpu: expected one of auto, cpu, mps, cuda, cuda:N, xpu or xpu:N"),
        (["experiment=link_prediction", "task.removed_fraction=1"], "task.removed_fraction=1.0: expected a number > 0"),
        (["experiment=ppi", "trainer.dropout=1"], "trainer.dropout=1.0: expected a number ≥ 0 and < 1"),
        (["experiment=ppi", "trainer.pretrain.epochs=-1"], "trainer.pretrain.epochs=-1: expected an integer ≥ 0"),
        (["experiment=scalability", "dataset.average_degree=x"], "dataset.average_degree=x: expected a number ≥ 0"),
        (["experiment=scalability", "task.memory_budget_gib=-2"], "task.memory_budget_gib=-2.0: expected a number > 0"),
        (["dataset=edgelist"], "dataset.path has no value: set it (dataset.path=...)"),
        (["encoder.dsitance=2"], "encoder.dsitance is not a setting of encoder=igel (its settings: name, distance,"),
        (["+extra=1"], "extra is not a setting of Config (its settings: name, seed,"),
    ],
)
def test_a_value_out_of_range_fails_the_check_in_one_line(compose_config, overrides, line):
    config = compose_config(*overrides)
    with pytest.raises(ConfigError) as error:
        schema.check(config)
    assert str(error.value).startswith(line)


def test_settings_that_an_experiment_gives_another_option_pass(compose_config, caplog):
    """experiment=scalability sets the Erdős–Rényi sizes; on another dataset they mean nothing, as before."""
    config = compose_config("experiment=scalability", "dataset=facebook")
    caplog.set_level(logging.INFO, logger="igel_exp.schema")
    schema.check(config)
    assert "dataset.num_nodes is not a setting of dataset=facebook: ignored" in caplog.text
    schema.check(compose_config("encoder=deepwalk"))  # the clustering experiment's encoder.distance
    schema.check(compose_config("experiment=ppi", "trainer.dropout=0", "trainer.lr=1"))  # bounds that hold


@pytest.mark.parametrize(
    "overrides, line",
    [
        (
            ["dataset.path=graph.txt"],
            "dataset.path is not a setting of dataset=miserables_cloned (its settings: name, bridge_stream);"
            " dataset=edgelist and dataset=graphsage take it",
        ),
        (
            ["experiment=link_prediction", "encoder=deepwalk", "encoder.distance=2"],
            "encoder.distance is not a setting of encoder=deepwalk (its settings: name); encoder=igel takes it",
        ),
        (
            ["dataset=facebook", "dataset.parallel_edges=true", "dataset.num_nodes=8"],
            "dataset.num_nodes is not a setting of dataset=facebook (its settings: name, parallel_edges);"
            " dataset=erdos_renyi takes it",
        ),
    ],
)
def test_another_options_setting_given_on_the_command_line_is_refused(compose_config, overrides, line):
    """What a user types is meant for this run: `dataset.path=FILE` on the default dataset would otherwise run Les
    Misérables and ignore the file."""
    config = compose_config(*overrides)
    schema.check(config)  # as an experiment file's key, let through
    with pytest.raises(ConfigError) as error:
        schema.check(config, schema.override_keys(overrides))
    assert str(error.value) == line
    assert schema.not_taken(config, schema.override_keys(overrides)) == [overrides[-1].split("=")[0]]


def test_override_keys_are_the_keys_set():
    overrides = ["dataset.path=a.txt", "+trainer.extra=1", "++seed=3", "seed=0,1", "~task.k_min", "dataset=facebook"]
    assert schema.override_keys(overrides) == ["dataset.path", "trainer.extra", "seed", "seed", "dataset"]


def test_a_new_key_is_one_field(compose_config):
    """The how-to of the module's docstring: a field with a range helper is typed, checked and listed."""

    @dataclasses.dataclass
    class Extended(schema.SkipGramTrainer):
        warmup_epochs: int = schema.at_least(0)

    values = OmegaConf.to_container(compose_config().trainer, enum_to_str=True)
    config = OmegaConf.merge(OmegaConf.structured(Extended), values, {"warmup_epochs": -1})
    with pytest.raises(ConfigError, match="warmup_epochs=-1: expected an integer ≥ 0"):
        schema.check(config)
