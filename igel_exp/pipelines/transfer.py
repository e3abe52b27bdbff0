"""Transfer of link prediction: dataset A's IGEL model, frozen, scored on dataset B's split beside B's own model.

A run of experiment=transfer_link_prediction carries the sections of B's link-prediction run and names A in
`task.source`. Both models come from ordinary link-prediction runs, found by identity (igel.config_hash, as
igel-reproduce finds runs) among the FINISHED runs of their experiment and run first where missing, so that the
link-prediction table and this one share them: A's is `experiment=link_prediction dataset=<task.source>` with this
run's seed and `task.source_overrides`, B's is this run's own config as experiment=link_prediction names it. With
task.source = dataset, A's is B's own run, this run's overrides included, with `task.source_overrides` on top (unless
they name another graph); for another A, this run's overrides apply to B's run only, which the run says in a warning
line. Then B's residual graph is encoded with A's frozen encoder (A's α and δmax: B's degrees above δmax count as
δmax) and embedded by A's W, and B's split is scored by the link-prediction evaluator with B's run's seed. With A = B
the model re-embeds its own training graph, so the transfer AUC equals B's own, bit for bit on the same CPU.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence

import mlflow
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.singleton import Singleton
from hydra.errors import HydraException, MissingConfigException
from mlflow.entities import Run
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from igel_exp import pipelines
from igel_exp.errors import ConfigError, DataError, JobTaken
from igel_exp.identity import DATA_TAG, HASH_TAG, NOT_IDENTITY, SOURCE_RUN_TAG, config_hash
from igel_exp.pipelines.common import Stages, load
from igel_exp.pipelines.embed import inductive_metrics
from igel_exp.pipelines.link_prediction import configured_split, data_key
from igel_exp.saved_model import ARTIFACT, IGELModel
from igel_exp.schema import describe, shown_value
from igel_exp.tasks.link_prediction import link_prediction_scores
from igel_exp.tracking import (
    PARENT_RUN_ENV,
    SHARED_RUN_ENV,
    environ_set,
    flatten,
    graph_name,
    run_name_of,
    store_call,
    tracked_run,
    tracking_uri,
    use_store,
)

log = logging.getLogger(__name__)

SOURCE_EXPERIMENT = "link_prediction"  # the conf/experiment/ file whose runs give the models
SHARED_RUN_WAIT_S = 5.0  # how often a transfer job looks again at a link-prediction run that another one is making
OWN_RUN_TAG = "igel.own_run"  # B's link-prediction run, whose AUC is own_auc
TRANSFER_KEYS = {"source": None, "source_overrides": []}  # the task keys of transfer, as link prediction has them
SET_BY_TRANSFER = ("experiment", "dataset", "seed")  # of A's run: task.source_overrides may not set them


@pipelines.pipeline("transfer_link_prediction")
def transfer_link_prediction(config: DictConfig) -> dict[str, float]:
    """AUC of A's frozen model on B's split (auc, val_auc) beside B's own (own_auc, own_val_auc)."""
    task = config.task
    source_config = link_prediction_config_of(config)
    lacks = settings_a_lacks(config, source_config)
    if lacks:  # one line: B's overrides do not reach A, whose run may take 16 min at the file's settings (AstroPh)
        one = len(lacks) == 1
        log.warning(
            "A's run (task.source=%s) does not take this run's %s, which %s to B's only: add %s to"
            " task.source_overrides for A",
            task.source,
            " ".join(lacks),
            "applies" if one else "apply",
            "it" if one else "them",
        )
    if source_config.encoder.name != "igel":
        # with A = B, A's run is B's own: its encoder is this run's unless task.source_overrides set another
        given = "task.source_overrides"
        if str(task.source) == str(config.dataset.name) and config.encoder.name == source_config.encoder.name:
            given = f"encoder={config.encoder.name} with task.source={task.source}, this run's dataset"
        raise ConfigError(
            f"{given}: A's run has encoder={source_config.encoder.name}, which embeds only the nodes it was trained"
            " on; transfer needs encoder=igel"
        )
    uri = use_store(tracking_uri(config.get("tracking", {}).get("uri")))
    stages = Stages()
    with stages("load"):  # the runs reused are of the graphs as they are now, not only of the same dataset.path
        dataset = load(config)
        data = data_key(dataset.graph)
    own_settings = own_config(config, source_config)
    source_data = data_key(load(source_config).graph)
    if source_data == data and _split_of(source_config) != _split_of(own_settings):
        # A would train on B's graph less another split's edges: on edges that B holds out, which its AUC then scores
        raise ConfigError(
            f"task.source_overrides: A's run would split B's graph otherwise than B's run ({_split_text(source_config)}"
            f" against {_split_text(own_settings)}), so its training graph would hold edges that B holds out: give A"
            " B's split settings"
        )
    own = finished_or_run(own_settings, data, needs_model=False)
    source = finished_or_run(source_config, source_data, needs_model=True)
    model = IGELModel.load(source.info.run_id, uri)
    # A's model (its graph and α) → B's graph, as other runs are named: `astroph α=3 → facebook seed=0`
    model_of = f"{graph_name(source_config.dataset)} {model.alpha}"
    name = run_name_of(config, encoded=False, graph=f"{model_of} → {graph_name(config.dataset)}")
    with tracked_run(config, config.name, run_name=name) as logger:
        logger.tags({SOURCE_RUN_TAG: source.info.run_id, OWN_RUN_TAG: own.info.run_id, DATA_TAG: data})
        logger.metrics(dataset.report.as_metrics())
        with stages("split"):
            split, key, _ = configured_split(dataset, config, data)
        if own.data.tags.get("split") != key:
            raise DataError(
                f"B's own run {own.info.run_id} used the split {own.data.tags.get('split')}, this run {key}:"
                " its data changed since"
            )
        logger.tags({"split": key})
        residual = split.residual_graph(dataset.graph.vs["name"])
        with stages("encode"):
            features = model.encoder.transform(residual)
        with stages("embed"):
            embeddings = model.embed_features(features)
        with stages("evaluate"):
            scores = link_prediction_scores(embeddings, split, config.seed, task.validation_fraction, task.classifier)
        metrics = {
            **scores,
            "own_auc": own.data.metrics["auc"],
            "own_val_auc": own.data.metrics["val_auc"],
            **inductive_metrics(model, residual, features),
            **stages.metrics(),
        }
        logger.metrics(metrics)
    log.info(
        "link prediction on %s with the model of %s (seed %d): AUC %.4f, its own model %.4f",
        dataset.name,
        task.source,
        config.seed,
        metrics["auc"],
        metrics["own_auc"],
    )
    return metrics


def link_prediction_config_of(config: DictConfig) -> DictConfig:
    """A's link-prediction run: experiment=link_prediction with dataset=<task.source>, this run's seed and
    task.source_overrides, or where task.source is this run's dataset B's own run with them (_b_with_source_overrides);
    where and how it runs (the keys outside its identity) follow this run."""
    task = config.task
    given, parser = [str(item) for item in task.source_overrides], OverridesParser.create()
    for item in given:
        try:  # one at a time: for a nested list or a bare word Hydra would only say it cannot parse the lot
            [parsed] = parser.parse_overrides([item])
        except HydraException:
            raise ConfigError(
                f"task.source_overrides: {item!r} is not an override: each item is one key=value, as on the command"
                " line (task.source_overrides=['trainer.epochs=1','encoder.distance=3'])"
            ) from None
        if parsed.key_or_group in SET_BY_TRANSFER:  # A's run would be another than the one the transfer run names
            raise ConfigError(
                f"task.source_overrides: {item!r} sets what transfer sets: A's dataset is task.source, its experiment"
                " link_prediction, its seed this run's"
            )
    overrides = [
        f"experiment={SOURCE_EXPERIMENT}",
        f"dataset={task.source}",
        f"seed={config.seed}",
        *given,
    ]
    try:
        source = compose_packaged(overrides)
        alone = compose_packaged(overrides[:3]) if str(task.source) == str(config.dataset.name) else None
    except (HydraException, OmegaConfBaseException) as error:
        raise ConfigError(
            f"task.source={task.source} task.source_overrides={list(task.source_overrides)}: " + describe(error)
        ) from None
    if alone is not None:  # A is B's dataset: B's own run, unless task.source_overrides make A another graph
        source = _b_with_source_overrides(config, source, alone) or source
    for key in NOT_IDENTITY:
        value = OmegaConf.select(config, key, default=_ABSENT)
        if value is not _ABSENT and OmegaConf.select(source, key, default=_ABSENT) is not _ABSENT:
            OmegaConf.update(source, key, copy.deepcopy(value), merge=False)
    try:  # A's own run would say it, as if of B's keys: `dataset.path has no value` for task.source=edgelist
        pipelines.check(source)
    except ConfigError as error:
        raise ConfigError(
            f"task.source={task.source}: A's run: {error} (A's settings go in task.source_overrides=['KEY=VALUE'])"
        ) from None
    return source


_ABSENT = object()


def _b_with_source_overrides(config: DictConfig, source: DictConfig, alone: DictConfig) -> DictConfig | None:
    """A's run where task.source is B's dataset: B's own link-prediction run, this run's settings and overrides
    included (`igel-run ... task.source=facebook dataset=facebook trainer.epochs=1` trains one model, not a second
    one at the file's epochs), with what task.source_overrides change: the values where `source` (A composed with them)
    differs from `alone` (A composed without). None where they change A's graph (dataset.*): A is another graph then,
    composed from task.source and task.source_overrides alone, as for any other A."""
    own = _plain(own_config(config, source))
    merged = _overlay(own, _plain(source), _plain(alone))
    return OmegaConf.create(merged) if merged.get("dataset") == own.get("dataset") else None


def _plain(config: DictConfig) -> dict:
    return OmegaConf.to_container(config, resolve=True, throw_on_missing=False, enum_to_str=True)


def _overlay(base: dict, given: dict, alone: dict) -> dict:
    """`base` with the changes that turn `alone` into `given`; a section whose keys they change (a group override,
    `encoder=deepwalk`) replaced whole."""
    merged = copy.deepcopy(base)
    for key, value in given.items():
        before, mine = alone.get(key, _ABSENT), base.get(key, _ABSENT)
        if value == before:
            continue
        if (
            isinstance(value, dict)
            and isinstance(before, dict)
            and isinstance(mine, dict)
            and value.keys() == before.keys()
        ):
            merged[key] = _overlay(mine, value, before)
        else:
            merged[key] = copy.deepcopy(value)
    for key in alone.keys() - given.keys():  # left out by a source override (~key)
        merged.pop(key, None)
    return merged


def settings_a_lacks(config: DictConfig, source: DictConfig) -> list[str]:
    """This run's settings of B's link-prediction run (its values that experiment=link_prediction dataset=B does not
    compose: the command line's overrides) that A's run does not share, A's graph (dataset.*) and where and how runs
    run (NOT_IDENTITY) aside: `trainer.epochs=1` on a transfer from another dataset trains A at the file's epochs."""
    try:
        alone = compose_packaged(
            [f"experiment={SOURCE_EXPERIMENT}", f"dataset={config.dataset.name}", f"seed={config.seed}"]
        )
    except (HydraException, OmegaConfBaseException):  # B's dataset is no packaged option (--config-dir): unknown
        return []
    own, a, b = (flatten(_plain(item)) for item in (own_config(config, source), source, alone))
    skipped = ("dataset.", *(f"{key}." for key in NOT_IDENTITY))
    return [
        f"{key}={shown_value(value)}"
        for key, value in own.items()
        if not f"{key}.".startswith(skipped) and b.get(key, _ABSENT) != value and a.get(key, _ABSENT) != value
    ]


def own_config(config: DictConfig, source_config: DictConfig) -> DictConfig:
    """B's link-prediction run: this run's config with link prediction's values of the transfer keys, named as A's
    run is."""
    own = copy.deepcopy(config)
    with open_dict(own):
        own.name = source_config.name
        own.task.name = source_config.task.name
        for key, value in TRANSFER_KEYS.items():
            own.task[key] = value
    return own


def compose_packaged(overrides: Sequence[str]) -> DictConfig:
    """The primary config `config` composed with `overrides`, as igel-run composes it: inside a Hydra app with the
    app's search path (configs added with --config-dir count), otherwise from the packaged tree. A Hydra context
    without `config` (a launcher's, for igel-reproduce: the experiments folder's) is set aside meanwhile."""
    if GlobalHydra.instance().is_initialized():
        try:
            return compose(config_name="config", overrides=list(overrides))
        except MissingConfigException:
            pass
    outer = Singleton._instances.pop(GlobalHydra, None)
    try:
        with initialize_config_module(config_module="igel_exp.conf", version_base="1.3"):
            return compose(config_name="config", overrides=list(overrides))
    finally:
        if outer is not None:
            Singleton._instances[GlobalHydra] = outer


def _split_of(config: DictConfig) -> tuple:
    """What a link-prediction run's split of its graph depends on: task.split, task.removed_fraction and the seed."""
    return config.task.get("split", "leak_free"), float(config.task.removed_fraction), int(config.seed)


def _split_text(config: DictConfig) -> str:
    how, fraction, _ = _split_of(config)
    return f"task.split={how} task.removed_fraction={fraction:g}"


def finished_or_run(config: DictConfig, data: str, needs_model: bool) -> Run:
    """The latest FINISHED run of `config` (by identity) on the graph whose data_key is `data` (a dataset.path whose
    file changed is other data), with a model when `needs_model`; run now if there is none,
    once another command's run of it, RUNNING, has ended (tracking.claimed: two transfer jobs on one graph, in two
    igel-reproduce or two workers, train its link-prediction run once).

    A run made here is a top-level run of its own experiment, as `igel-run` would have made it, never nested under
    the sweep that runs this transfer (its parent is a run of another experiment).
    """
    identity = config_hash(config)
    shared = "1"  # until a run this one cannot wait for or reuse is found: then it runs anyway
    while (found := finished_run(str(config.name), identity, data, needs_model)) is None:
        log.info("no finished run of %s (%s): running it", config.name, _describe(config))
        try:
            with environ_set(PARENT_RUN_ENV, None), environ_set(SHARED_RUN_ENV, shared):
                pipelines.run(config)
            break
        except JobTaken as taken:  # another transfer job (another igel-reproduce, a worker) is making it: wait
            # for it where its end will be seen (tracking.liveness: a process on this machine, or one that sends
            # heartbeats); a FINISHED one without a model is no use
            wait = taken.running
            log.info("%s: %s", taken, "waiting for it to end" if wait else "running it here")
            time.sleep(SHARED_RUN_WAIT_S if wait else 0)
            shared = "1" if wait else None
    else:
        log.info("reusing run %s of %s (%s)", found.info.run_id, config.name, _describe(config))
        return found
    found = finished_run(str(config.name), identity, data, needs_model)
    if found is None:  # the run ended without error, so only a store that lost it gets here
        raise DataError(f"the run of {config.name} ({_describe(config)}) just made is not in the MLflow store")
    return found


@store_call()
def finished_run(experiment: str, identity: str, data: str, needs_model: bool) -> Run | None:
    """The latest FINISHED run of the experiment tagged with `identity` and `data` (that logged a model, if asked)."""
    found = mlflow.get_experiment_by_name(experiment)
    if found is None:
        return None
    client = mlflow.MlflowClient()
    runs = client.search_runs(
        [found.experiment_id],
        filter_string=f"tags.`{HASH_TAG}` = '{identity}' and tags.`{DATA_TAG}` = '{data}'"
        " and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
    )
    for run in runs:
        if not needs_model or client.list_artifacts(run.info.run_id, ARTIFACT):
            return run
    return None


def _describe(config: DictConfig) -> str:
    return f"dataset={config.dataset.name} encoder={config.encoder.name} seed={config.seed}"
