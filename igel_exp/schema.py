"""The typed schema of the config tree: one dataclass per kind of file in conf/<group>/, in Hydra's ConfigStore.

Each YAML file of a group names its schema first in its defaults list (`- /schema/encoder/igel@_here_`), so that
Hydra merges the file's values, then an experiment's and the command line's, onto a typed node: a value of the
wrong type (`trainer.lr=abc`) or outside an enum (`encoder.transform=sqrt`) fails while the config is composed.
The YAML files keep the values and their comments; a dataclass says only what a key may hold (its fields have no
defaults of their own, so a value lives in one place). Ranges (`trainer.epochs` ≥ 1, `task.removed_fraction` in
(0, 1), the pattern of `trainer.device`) are field metadata that `check` reads right after composition, before
anything runs. `describe` turns Hydra's and OmegaConf's multi-line errors into one line naming the key.

Adding a key: a field on the dataclass of its file kind, with its type and a range helper where one applies
(`epochs: int = at_least(1)`), then its value and comment in the YAML file(s). A key that every option of a group
takes (one that a `protocol=` file sets for any dataset, say) goes on the group's base class (`Dataset`,
`Encoder`, `Trainer`, `Task`). A new kind of file is a new dataclass, entered in SCHEMAS and named in the file's
defaults list. Top-level keys and new config groups are fields of `Config`.

Dataset and encoder nodes are open: an experiment file sets the keys of the option it picks (experiment=scalability
sets dataset.num_nodes for its Erdős–Rényi graph), which stay harmless when the command line picks another option
(`experiment=scalability dataset=facebook`). `check` accepts such a key when another option of the group declares
it, and rejects any other unknown key; a key given on the command line (`given`) must be the picked option's own:
`igel-run dataset.path=FILE` on the default dataset is refused, not run on Les Misérables.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from importlib.resources import files
from typing import Any, Optional

import yaml
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from igel_exp.errors import ConfigError, first_line

log = logging.getLogger(__name__)

# Optional[...] rather than `X | None`: OmegaConf reads the annotations at runtime, on Python 3.10 too
# ruff: noqa: UP007, UP045


# --- the ranges, as field metadata ------------------------------------------------------------------------------


def at_least(low: float, **metadata: Any) -> Any:
    """A field whose value (when not null) is ≥ `low`."""
    return field(default=MISSING, metadata={"min": low, **metadata})


def above(low: float) -> Any:
    """A field whose value (when not null) is > `low`."""
    return field(default=MISSING, metadata={"above": low})


def between(low: float, high: float, *, closed_low: bool = False) -> Any:
    """A field in the open interval (low, high), or [low, high) with `closed_low`."""
    return field(default=MISSING, metadata={"min" if closed_low else "above": low, "below": high})


def matching(pattern: str, meaning: str) -> Any:
    """A string field that must match `pattern` (a full match); `meaning` says what it may be, for the message."""
    return field(default=MISSING, metadata={"pattern": pattern, "meaning": meaning})


def non_blank(meaning: str) -> Any:
    """A string field that holds a non-space character: blank is refused, not taken for null, where null picks a
    default (`data.root=$DIR` with $DIR unset would read another folder unawares)."""
    return matching(r".*\S.*", f"the non-blank {meaning}")


def text(meaning: str) -> Any:
    """A non-blank string field typed Any, so that `check` sees a value that Hydra's override grammar read as a number
    or a boolean (`source_run=1e5` is 100000.0 to it, `1_000` 1000, `true` True) and refuses it in one line: a str
    field would turn it into another string ('100000.0'), looked for under a name nobody gave."""
    return field(default=MISSING, metadata={"text": True, "pattern": r".*\S.*", "meaning": f"the non-blank {meaning}"})


def number(low: float) -> Any:
    """An int or float kept as written (typed Any: a float field would turn the YAML's 8 into 8.0, and so change the
    identity of every run that has it), ≥ `low`."""
    return field(default=MISSING, metadata={"number": True, "min": low})


def one_of(*choices: Any) -> Any:
    """A field typed Any that takes one of `choices`, each of its own type (true, false and "auto": a YAML bool or a
    string, which no Enum of OmegaConf holds)."""
    return field(default=MISSING, metadata={"one_of": choices})


def value() -> Any:
    """A field without a range; its value comes from the YAML file."""
    return field(default=MISSING)


# --- choices ----------------------------------------------------------------------------------------------------


class Choice(str, Enum):
    """A config choice that is its value wherever a string is expected: ==, f-strings, JSON (the identity hash),
    dict keys. The members' names are their values, as Hydra reads a choice by its name."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Transform(Choice):
    log = "log"
    none = "none"


class Normalise(Choice):
    sum = "sum"
    max = "max"
    l2 = "l2"
    none = "none"


class Noise(Choice):
    uniform = "uniform"
    degree = "degree"


class Activation(Choice):
    elu = "elu"
    relu = "relu"
    tanh = "tanh"
    linear = "linear"


class NodeIds(Choice):
    int = "int"
    token = "token"


class PPILayout(Choice):
    auto = "auto"
    graphsage = "graphsage"
    edgelists = "edgelists"


class RankingGraph(Choice):
    directed = "directed"
    undirected = "undirected"


class Protocol(Choice):
    faithful = "faithful"
    authors = "authors"


class WeightInit(Choice):
    normal = "normal"
    distance_scaled = "distance_scaled"


class LogitInit(Choice):
    fixed = "fixed"
    uniform = "uniform"


class Batching(Choice):
    walks = "walks"
    buckets = "buckets"


class Precision(Choice):
    float32 = "float32"
    bfloat16 = "bfloat16"


class Neighbourhood(Choice):
    open = "open"
    closed = "closed"


class CentralityTies(Choice):
    rounding = "rounding"
    bits = "bits"


class ClusterMembers(Choice):
    all = "all"
    in_table = "in_table"


class Split(Choice):
    leak_free = "leak_free"
    read_back = "read_back"


class Classifier(Choice):
    logistic_regression = "logistic_regression"
    adam_linear = "adam_linear"


DEVICE = matching(r"auto|cpu|mps|(cuda|xpu)(:\d+)?", "auto, cpu, mps, cuda, cuda:N, xpu or xpu:N")


# --- dataset/ ---------------------------------------------------------------------------------------------------


@dataclass
class Dataset:
    """Every dataset; alone, the named ones that need no setting (read from the data root, or built in)."""

    name: str = value()


@dataclass
class ClonedDataset(Dataset):
    """A graph cloned and bridged (dataset=miserables_cloned)."""

    bridge_stream: Optional[int] = at_least(0)


@dataclass
class EdgeFileDataset(Dataset):
    """A graph read from an edge-list file (yours, or a named one from the data root)."""

    parallel_edges: bool = value()


@dataclass
class EdgeListDataset(EdgeFileDataset):
    path: Any = text("edge list files")  # typed Any: a str, which check requires (dataset.path=1e5: see text)
    node_ids: NodeIds = value()


@dataclass
class ErdosRenyiDataset(Dataset):
    num_nodes: int = at_least(1)
    average_degree: Any = number(0)


@dataclass
class PPIDataset(Dataset):
    layout: PPILayout = value()
    features: bool = value()
    labels: bool = value()


@dataclass
class GraphSageDataset(Dataset):
    path: Any = text("GraphSAGE folders")
    prefix: Any = text("GraphSAGE file prefixes")
    features: bool = value()
    labels: bool = value()


# --- encoder/ ---------------------------------------------------------------------------------------------------


@dataclass
class Encoder:
    """Every encoder; alone, DeepWalk (a free vector per node)."""

    name: str = value()


@dataclass
class IGELEncoder(Encoder):
    distance: int = at_least(0)
    transform: Transform = value()
    normalise: Normalise = value()
    relative_degrees: bool = value()
    chunk_size: int = at_least(1)
    encoded_distance: Optional[int] = at_least(0)
    weight_init: WeightInit = value()
    weight_seed: Optional[int] = at_least(0)


@dataclass
class Node2VecEncoder(Encoder):
    # the walks' rejection sampler keeps a step with probability as low as min(p, 1/p, q, 1/q): beyond these a walk
    # at a node of degree 1 waits ~p draws to step back (node2vec's grids span 0.25-4)
    return_p: float = between(0.01, 100, closed_low=True)
    inout_q: float = between(0.01, 100, closed_low=True)


# --- trainer/ ---------------------------------------------------------------------------------------------------


@dataclass
class Trainer:
    objective: str = value()
    device: str = DEVICE
    deterministic: bool = value()
    dim: int = at_least(1)
    epochs: int = at_least(1)
    batch_size: int = at_least(1)
    lr: float = above(0)


@dataclass
class SkipGram:
    """The walk and negative-sampling settings: of trainer=skipgram, and of the supervised trainer's pre-training."""

    walks_per_node: int = at_least(1)
    walk_length: int = at_least(2)  # a shorter walk has no pairs
    window: int = at_least(1)
    negatives: int = at_least(1)
    noise: Noise = value()
    logit_affine: bool = value()


@dataclass
class SkipGramTrainer(SkipGram, Trainer):
    logit_init: LogitInit = value()
    batch_scale: int = at_least(1)
    precision: Precision = value()
    batching: Batching = value()
    walk_stream: Optional[int] = at_least(0)
    cuda_graphs: bool = value()
    compile: Any = one_of(False, True, "auto")


@dataclass
class Pretrain(SkipGram):
    epochs: int = at_least(0)  # 0: no pre-training
    freeze: bool = value()
    batch_size: int = at_least(1)
    lr: float = above(0)


@dataclass
class SupervisedTrainer(Trainer):
    hidden: int = at_least(1)
    depth: int = at_least(1)
    activation: Activation = value()
    dropout: float = between(0, 1, closed_low=True)
    weight_decay: float = at_least(0)
    patience: int = at_least(1)
    precision: Precision = value()
    pretrain: Pretrain = field(default_factory=Pretrain)


# --- task/ ------------------------------------------------------------------------------------------------------


def metric_name() -> Any:
    return non_blank("metric names (what igel-run returns to a sweeper)")


@dataclass
class Task:
    name: str = value()


@dataclass
class ClusteringTask(Task):
    k_min: int = at_least(1)
    k_max: int = at_least(1)
    kmeans_n_init: int = at_least(1)
    objective: str = metric_name()
    score_neighbourhood: Neighbourhood = value()
    centrality_ties: CentralityTies = value()
    draw_max_nodes: int = at_least(0)


@dataclass
class LinkPredictionTask(Task):
    removed_fraction: float = between(0, 1)
    validation_fraction: float = between(0, 1)
    split_cache: Optional[str] = non_blank("folders (null: ~/.cache/igel-exp/splits)")
    objective: str = metric_name()
    split: Split = value()
    classifier: Classifier = value()
    source: Optional[str] = value()  # experiment=transfer_link_prediction: the dataset whose model embeds this one
    source_overrides: list[str] = field(default_factory=list)


@dataclass
class NodeClassificationTask(Task):
    use_igel: bool = value()
    use_features: bool = value()
    standardise_features: bool = value()
    objective: str = metric_name()


@dataclass
class ScalabilityTask(Task):
    memory_budget_gib: Optional[float] = above(0)
    memory_samples: int = at_least(1)
    objective: str = metric_name()
    isolate: bool = value()


@dataclass
class SisterCitiesTask(Task):
    k: int = at_least(1)
    kmeans_n_init: int = at_least(1)
    kmeans_stream: Optional[int] = at_least(0)
    ranking_graph: RankingGraph = value()
    reuse_embeddings: bool = value()
    score_neighbourhood: Neighbourhood = value()
    centrality_ties: CentralityTies = value()
    cluster_members: ClusterMembers = value()


# --- tracking/, data and the top level --------------------------------------------------------------------------


@dataclass
class Tracking:
    uri: Optional[str] = non_blank("URIs (null: the default store)")
    parent_run_id: Optional[str] = non_blank("run ids (null: $IGEL_PARENT_RUN_ID, else none)")


@dataclass
class Data:
    root: Optional[str] = non_blank("folders (null: $IGEL_DATA_DIR, else ~/.cache/igel-exp)")
    download: bool = value()


@dataclass
class RunSettings:
    """What igel-run's and igel-embed's top levels share."""

    # it names the MLflow experiment: MLflow refuses more than 500 characters, but only once the store exists
    name: str = matching(r"(?=.*\S).{1,500}", "the non-blank names of at most 500 characters (MLflow's experiments)")
    seed: int = between(0, 2**32, closed_low=True)  # what numpy's and scikit-learn's generators take
    progress: bool = value()
    threads: Optional[int] = at_least(1)
    data: Data = field(default_factory=Data)


@dataclass
class Config(RunSettings):
    """The top level (conf/config.yaml): run settings, then one field per config group."""

    protocol: Protocol = value()
    dataset: Any = value()
    encoder: Any = value()
    trainer: Any = value()
    task: Any = value()
    tracking: Any = value()
    # an experiments/ file's reference data for the report (igel_exp.plan); null elsewhere, and never a run param
    reproduce: Optional[Any] = None


@dataclass
class EmbedConfig(RunSettings):
    """igel-embed's top level (conf/embed.yaml)."""

    source_run: Any = text("run ids and model folders")  # typed Any: a str, which check requires (text)
    dataset: Any = value()
    tracking: Any = value()


# group -> kind of file -> schema; each is stored as schema/<group>/<kind>, which the group's files name
SCHEMAS: dict[str, dict[str, type]] = {
    "dataset": {
        "named": Dataset,
        "cloned": ClonedDataset,
        "edge_file": EdgeFileDataset,
        "edgelist": EdgeListDataset,
        "erdos_renyi": ErdosRenyiDataset,
        "ppi": PPIDataset,
        "graphsage": GraphSageDataset,
    },
    "encoder": {"igel": IGELEncoder, "deepwalk": Encoder, "node2vec": Node2VecEncoder},
    "trainer": {"skipgram": SkipGramTrainer, "supervised": SupervisedTrainer},
    "task": {
        "clustering": ClusteringTask,
        "link_prediction": LinkPredictionTask,
        "node_classification": NodeClassificationTask,
        "scalability": ScalabilityTask,
        "sister_cities": SisterCitiesTask,
    },
    "tracking": {"mlflow": Tracking},
}
OPEN_GROUPS = ("dataset", "encoder")  # experiment files set keys of the option they pick: see the docstring
ROOT = "igel_schema"  # conf/config.yaml's first default
EMBED_ROOT = "igel_embed_schema"  # conf/embed.yaml's


def register() -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent); igel_exp.conf does it when imported, so that every
    composition of the packaged configs (igel-run, igel-reproduce, Hydra's compose API) has them."""
    store = ConfigStore.instance()
    store.store(name=ROOT, node=Config)
    store.store(name=EMBED_ROOT, node=EmbedConfig)
    for group, kinds in SCHEMAS.items():
        for kind, schema in kinds.items():
            flags = {"struct": False} if group in OPEN_GROUPS else None
            store.store(group=f"schema/{group}", name=kind, node=OmegaConf.structured(schema, flags=flags))


# --- checks after composition -----------------------------------------------------------------------------------


def check(config: DictConfig, given: Iterable[str] = ()) -> None:
    """Raise ConfigError naming the first key that has no value, is out of its range, or is no setting at all.

    Types and choices were checked while composing, but a `text` field's (a string, which Hydra may have read as a
    number: `source_run=1e5`); nodes without a schema (a config read back from YAML) are not checked. A key of a
    sibling option in an open group is let through, with a log line, unless it is one of the keys `given` on the
    command line (override_keys): those the user meant for this run.
    """
    for problem in _problems(config, ""):
        raise ConfigError(problem)
    refuse_option_names(given)
    for key in not_taken(config, given):
        raise ConfigError(not_taken_message(config, key))


# the keys that name a group's option: the pipelines load and run what they say
OPTION_NAMES = {f"{group}.name": group for group in ("dataset", "encoder", "task")}


def refuse_option_names(given: Iterable[str]) -> None:
    """Raise ConfigError for `dataset.name=facebook` (encoder.name, task.name) among the command line's keys: the
    pipelines load and run what the name says, but the option's other settings, its schema and what the choice selects
    (conf/specialise/ files, a protocol's switches) stay the picked option's. `experiment=link_prediction
    dataset.name=astroph` ran AstroPh, named so, with Facebook's settings (α = 2, 10 epochs, walks of 150: the
    specialise/ file of the default dataset=facebook) where dataset=astroph has α = 3, 8 epochs, walks of 100;
    `encoder.name=deepwalk` ran DeepWalk logging IGEL's encoder.distance as its own.

    So is `task=…`: each experiment has one task, and `igel-run task=link_prediction` ran link prediction on the default
    experiment's graph, Les Misérables, filed in MLflow under its experiment, `clustering`."""
    for key in given:
        if key == "task":
            raise ConfigError(
                "task= is picked by the experiment, and is not set on its own: pick the experiment instead"
                " (experiment=OPTION, listed by --help), whose dataset, settings and MLflow experiment follow it"
            )
        if key in OPTION_NAMES:
            group = OPTION_NAMES[key]
            raise ConfigError(
                f"{key} names the option that {group}= picks, and is not set on its own: pick the option instead"
                f" ({group}=OPTION), whose settings follow it"
            )


JOBLIB_LAUNCHER = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


def joblib_settings(launcher: DictConfig) -> dict:
    """The settings of Hydra's joblib launcher (`hydra.launcher.*`) as it passes them to joblib.Parallel."""
    from hydra_plugins.hydra_joblib_launcher._core import process_joblib_cfg

    settings = {key: value for key, value in OmegaConf.to_container(launcher).items() if key != "_target_"}
    settings["backend"] = "loky"  # as the launcher sets it
    process_joblib_cfg(settings)  # and as it reads numbers given as strings
    return settings


def check_launcher(launcher: DictConfig) -> None:
    """Raise ConfigError for settings of Hydra's joblib launcher (`hydra.launcher.*`) that joblib refuses: it reads them
    only when the jobs launch, after the sweep's store and parent run are made (`hydra.launcher.n_jobs=0` was a
    50-line traceback and a FAILED parent run)."""
    if launcher.get("_target_") != JOBLIB_LAUNCHER:
        return
    import joblib
    from joblib._utils import eval_expr

    settings = joblib_settings(launcher)
    try:
        joblib.Parallel(**settings)  # checks the backend's hints
        n_jobs = joblib.effective_n_jobs(settings.get("n_jobs"))
    except (TypeError, ValueError) as error:
        raise ConfigError(f"hydra.launcher: joblib refuses its settings: {error}") from None
    # read by joblib only as the jobs are dispatched: 0 ran none (a FINISHED sweep of no runs), a word a traceback
    pre_dispatch = settings.get("pre_dispatch", "all")
    if pre_dispatch != "all":
        try:
            amount = int(eval_expr(str(pre_dispatch).replace("n_jobs", str(n_jobs))))
        except Exception:
            amount = None
        if amount is None or amount < 1:
            raise ConfigError(
                f"hydra.launcher.pre_dispatch={pre_dispatch}: expected all, a number ≥ 1 or an expression of n_jobs"
                " (2*n_jobs)"
            )
    if settings.get("timeout") is not None:  # joblib gives up on a job, whose run stays RUNNING, in a traceback
        raise ConfigError(
            f"hydra.launcher.timeout={settings['timeout']}: a job cut off mid-run would leave its MLflow run RUNNING;"
            " leave it null"
        )


def override_keys(overrides: Iterable[str]) -> list[str]:
    """The keys that Hydra overrides set (`dataset.path=x`, `+trainer.foo=1`, sweeps `seed=0,1`), deletions left out."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return [override.key_or_group for override in parsed if not override.is_delete()]


def not_taken(config: DictConfig, keys: Iterable[str]) -> list[str]:
    """The keys among `keys` that an open group's picked option does not take (another option's, let through)."""
    found = []
    for key in keys:
        group, _, setting = key.partition(".")
        if group in OPEN_GROUPS and setting and "." not in setting and setting in config.get(group, {}):
            schema = OmegaConf.get_type(config[group])  # none for a user's file without its schema line: unchecked
            if dataclasses.is_dataclass(schema) and setting not in _field_names(schema):
                found.append(key)
    return found


def not_taken_message(config: DictConfig, key: str) -> str:
    """One line: `key` is not a setting of the group's picked option; its settings, and the options that take it."""
    group = key.partition(".")[0]
    option = config[group]
    picked = f"{group}={option.get('name')}"
    return f"{_not_a_setting(key, picked, OmegaConf.get_type(option))}; {taken_by(key)}"


def taken_by(key: str) -> str:
    """Which options of the key's group take it (`dataset=edgelist and dataset=graphsage take it`), from the schema
    that each of the group's files (conf/<group>/) names."""
    group, _, setting = key.partition(".")
    takers = [
        f"{group}={name}" for name in group_options(group) if setting in _field_names(_option_schema(group, name))
    ]
    if len(takers) == 1:
        return f"{takers[0]} takes it"
    return f"{', '.join(takers[:-1])} and {takers[-1]} take it"


def group_options(*folder: str) -> list[str]:
    """The options of a packaged config group: its YAML files' stems, sorted."""
    entries = files("igel_exp.conf").joinpath(*folder).iterdir()
    return sorted(entry.name.removesuffix(".yaml") for entry in entries if entry.name.endswith(".yaml"))


def picked_groups(config_name: str) -> list[str]:
    """The groups whose option a packaged primary config (`config`, `embed`) must pick: its defaults list's groups but
    `experiment`, a preset of the others' options, without which they keep their own defaults."""
    text = files("igel_exp.conf").joinpath(f"{config_name}.yaml").read_text()
    entries = [entry for entry in yaml.safe_load(text)["defaults"] if isinstance(entry, dict)]
    return [group for entry in entries for group in entry if "/" not in group and group != "experiment"]


def _option_schema(group: str, name: str) -> type:
    """The schema that conf/<group>/<name>.yaml names first in its defaults list."""
    text = files("igel_exp.conf").joinpath(group, f"{name}.yaml").read_text()
    entry = yaml.safe_load(text)["defaults"][0]
    return SCHEMAS[group][entry.removeprefix(f"/schema/{group}/").removesuffix("@_here_")]


def _field_names(schema: type) -> list[str]:
    return [item.name for item in dataclasses.fields(schema)]


def _dataclasses() -> dict[str, type]:
    """This module's schemas by class name, as OmegaConf's errors name them."""
    return {name: item for name, item in globals().items() if isinstance(item, type) and dataclasses.is_dataclass(item)}


def _schema_named(name: str) -> tuple[str, type]:
    """A schema that OmegaConf's error names by its class, as a user names it (`trainer=skipgram`, where one option of
    a group has it), and the schema."""
    schema = _dataclasses()[name]
    for group in (group for group, kinds in SCHEMAS.items() if schema in kinds.values()):
        users = [f"{group}={option}" for option in group_options(group) if _option_schema(group, option) is schema]
        if len(users) == 1:
            return users[0], schema
    return name, schema


def _not_a_setting(key: str, option: str, schema: type) -> str:
    return f"{key} is not a setting of {option} (its settings: {', '.join(_field_names(schema))})"


def _problems(node: DictConfig, prefix: str) -> Iterator[str]:
    schema = OmegaConf.get_type(node)
    if not dataclasses.is_dataclass(schema):
        return
    fields = {item.name: item for item in dataclasses.fields(schema)}
    for key in node.keys():
        name = f"{prefix}{key}"
        if key not in fields:
            yield from _unknown(node, name, schema)
            continue
        if OmegaConf.is_missing(node, key):
            yield f"{name} has no value: set it ({name}=...)"
            continue
        try:
            item = node[key]
        except OmegaConfBaseException as error:  # an interpolation that resolves to a value of the wrong type
            yield describe(error)
            continue
        if fields[key].metadata.get("text") and not isinstance(item, str):
            yield _not_text(name, item)
        elif isinstance(item, DictConfig):
            yield from _problems(item, f"{name}.")
        elif item is not None:
            problem = _out_of_range(item, fields[key].metadata)
            if problem:
                yield f"{name}={item}: expected {problem}"


def _not_text(name: str, item: Any) -> str:
    """Why a `text` field's value is no string, in one line: a value Hydra read as a number or a boolean is quoted to
    stay as typed, and bash drops one pair of quotes, hence two (`source_run="'1e5'"`; `source_run='1e5'` reaches
    Hydra as source_run=1e5)."""
    if item is None:
        return f"{name}=null: expected a value"
    if not isinstance(item, bool | int | float):  # a list or a mapping
        return f"{name}={Override._get_value_element_as_str(OmegaConf.to_container(item))}: expected a string"
    if isinstance(item, bool):
        kind, example = "true or false", shown_value(item)
    else:  # an int's digits are most likely as typed (1_000 aside); a float's are not (1e5, 1.50)
        kind = "a number (1e5 is 100000.0 to it, 1_000 is 1000)"
        example = shown_value(item) if isinstance(item, int) else "1e5"
    return (
        f"{name}={shown_value(item)}: Hydra read the value as {kind}, not as text: quote it as typed, inside the"
        f" shell's quotes ({name}=\"'{example}'\")"
    )


def _unknown(node: DictConfig, name: str, schema: type) -> Iterator[str]:
    group, _, key = name.partition(".")
    siblings = {setting for kind in SCHEMAS.get(group, {}).values() for setting in _field_names(kind)}
    option = f"{group}={node.get('name')}" if key and "name" in node else schema.__name__
    if "." not in key and key in siblings:
        log.info("%s is not a setting of %s: ignored", name, option)
        return
    yield _not_a_setting(name, option, schema)


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _out_of_range(item: Any, metadata: Any) -> str | None:
    """What the value should have been, or None when it is in range."""
    if metadata.get("number") and (isinstance(item, bool) or not isinstance(item, int | float)):
        return f"a number ≥ {metadata['min']}"
    if "one_of" in metadata:
        taken = any(type(item) is type(choice) and item == choice for choice in metadata["one_of"])
        return None if taken else f"one of {', '.join(shown_value(choice) for choice in metadata['one_of'])}"
    if "pattern" in metadata:
        return None if re.fullmatch(metadata["pattern"], str(item)) else f"one of {metadata['meaning']}"
    if not {"min", "above", "below"} & set(metadata):
        return None
    bounds = []
    if "min" in metadata:
        bounds.append(f"≥ {metadata['min']}")
    if "above" in metadata:
        bounds.append(f"> {metadata['above']}")
    if "below" in metadata:
        bounds.append(f"< {metadata['below']}")
    # numpy and torch take 64-bit integers: a larger one passed every bound, then was an OverflowError or TypeError
    # traceback inside the run (trainer.dim=1e20 written out), or ran as if clipped (trainer.batch_size)
    wide = isinstance(item, int) and not isinstance(item, bool) and not INT64_MIN <= item <= INT64_MAX
    if wide:
        bounds.append(f"≤ {INT64_MAX} (64 bits)")
    inside = (
        not wide
        and math.isfinite(item)  # inf passes every bound, then trains to NaN or never ends
        and item >= metadata.get("min", item)
        and ("above" not in metadata or item > metadata["above"])
        and ("below" not in metadata or item < metadata["below"])
    )
    kind = "an integer" if isinstance(item, int) else "a number" if math.isfinite(item) else "a finite number"
    return None if inside else f"{kind} {' and '.join(bounds)}"


def shown_value(value: Any) -> str:
    """A value as a YAML file or the command line write it: true, null."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def plain(config: DictConfig) -> DictConfig:
    """The config without its schema: choices as their strings, what the pipelines, MLflow and the hash read."""
    return OmegaConf.create(OmegaConf.to_container(config, enum_to_str=True))


# --- one-line errors --------------------------------------------------------------------------------------------

GLOBAL_PACKAGE_HINT = "(an experiment file starts with `# @package _global_`)"
_TYPE_NAMES = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false", "String": "a string"}


def describe(error: BaseException) -> str:
    """One line for a composition or validation error, naming the key and what it expects where Hydra or OmegaConf
    say which (their own messages take four to twenty lines)."""
    if isinstance(error, MissingConfigException) and error.options:
        return f"{first_line(error)}; available: {', '.join(error.options)}"
    if isinstance(error, OverrideParseException):  # `LexerNoViableAltException: name=é`, naming only the parser
        override = re.sub(r"^\w+Exception: ", "", first_line(error))
        return (
            f"{override}: Hydra's override grammar cannot read it; quote a value that holds spaces or characters"
            " such as é (key='value')"
        )
    cause = error.__cause__ if isinstance(error.__cause__, OmegaConfBaseException) else error
    text = f"{error}\n{cause}"
    key = getattr(cause, "full_key", None) or _find(r"full_key: (\S+)", text)
    if key:
        where = _find(r"^In '([^']+)'", str(error))  # the file whose value failed, when not the command line
        if key == "experiment" and where:  # an experiment file without its package line (an empty one too)
            return f"{where}.yaml: Hydra nests its keys under `experiment`, no setting {GLOBAL_PACKAGE_HINT}"
        return _describe_key(key, getattr(cause, "value", None), text) + (f" (set in {where})" if where else "")
    if isinstance(error, HydraException | OmegaConfBaseException) and cause is not error:
        return f"{first_line(error)}: {first_line(cause)}"
    return _with_reason(error)


def _with_reason(error: BaseException) -> str:
    """Hydra's first line, with its second where the first only leads to it ("… raised while composing config:") or
    the second says what to do ("Did you mean to override dataset?"); an experiment file without its package line,
    whose overrides Hydra then applies under `experiment`, is named as such."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if len(lines) < 2 or not (lines[0].endswith(":") or lines[1].startswith("Did you mean")):
        return first_line(error)
    hint = f" {GLOBAL_PACKAGE_HINT}" if "@experiment." in lines[0] else ""
    return f"{lines[0]} {lines[1]}{hint}"


def _describe_key(key: str, given: Any, text: str) -> str:
    shown = f"{key}={shown_value(given)}" if given is not None else key
    typed = _find(r"Error merging override (.+)", text) or shown  # as on the command line: name=[a], not name=['a']
    # OmegaConf's words: "Value 'x' could not be converted to Integer", "Cannot convert 'list' to string"
    converted = _find(r"could not be converted to (\w+)", text) or _find(r"Cannot convert '\w+' to (\w+)", text)
    if converted:
        return f"{typed}: expected {_TYPE_NAMES.get(converted.capitalize(), converted)}"
    if _find(r"(is not a valid bool)", text):
        return f"{shown}: expected true or false"
    choices = _find(r"expected one of \[(.*)\]", text)
    if choices:
        return f"{shown}: expected one of {choices}"
    if _find(r"(is not Optional)", text):
        return f"{key}=null: expected a value"
    if _find(r"(is not a ListConfig, list or tuple|Cannot merge DictConfig with ListConfig)", text):
        return f"{typed}: expected a list, such as [a, b]"
    schema = _find(r"Key '[^']*' not in '([^']+)'", text)
    if schema in _dataclasses():
        return _not_a_setting(key, *_schema_named(schema))
    if schema:
        return f"{key} is not a setting of {schema}"
    return f"{shown}: {first_line(text)}"


def _find(pattern: str, text: str) -> str | None:
    found = re.search(pattern, text, re.MULTILINE)
    return found.group(1) if found else None
