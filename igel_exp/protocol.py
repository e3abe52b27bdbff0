"""Which experiments a protocol other than `faithful` is defined for (the `protocol=` config group).

`protocol=faithful` (the default) runs what the paper describes; another protocol is a set of switches per task and
dataset, conf/specialise/protocol/<protocol>_<task>_<dataset>.yaml, that set ordinary keys of the boxes. Hydra applies
such a file when it exists and silently skips it otherwise (an `optional` default), so a protocol asked of a task and
dataset without a file would run the faithful computation under another name: `check_protocol` refuses it first.

A run's protocol names what it ran, so every switch of it holds (`overridden`): under `protocol=authors` each key its
files set for the task and dataset keeps the file's value, and under `protocol=faithful` each of those keys keeps its
faithful value. An override that sets one otherwise (`protocol=authors trainer.batching=walks`; `protocol=faithful
dataset.parallel_edges=true` on Sister Cities, the ablation that ruled the parallel edges out) runs neither path.
igel-run runs it, as a researcher's ablation, and says so: a warning, and its `igel.protocol` tag and its name say
`faithful with dataset.parallel_edges=true` (`label`), so no one reads it as a protocol's run. igel-reproduce and
igel-report refuse it (`check_switches`): a table's columns are the protocols, and such an override would put runs of
neither path in them.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from igel_exp.errors import ConfigError
from igel_exp.identity import ADDED_DEFAULTS
from igel_exp.schema import group_options, shown_value

DEFAULT = "faithful"
SWITCHES = ("specialise", "protocol")  # the folder of the switch files in the packaged config tree
PAIRS = ("specialise", "pair")  # a protocol's switches of one encoder only: <protocol>_<task>_<dataset>_<encoder>.yaml
_ABSENT = object()


def defined(protocol: str) -> list[tuple[str, str]]:
    """The (task, dataset) pairs with a switch file for `protocol`; the task options (conf/task) tell where a file
    name's task ends, as both may hold underscores."""
    tasks = group_options("task")
    pairs = []
    for stem in group_options(*SWITCHES):
        if stem.startswith(f"{protocol}_"):
            rest = stem.removeprefix(f"{protocol}_")
            task = max((task for task in tasks if rest.startswith(f"{task}_")), key=len, default=None)
            if task is not None:
                pairs.append((task, rest.removeprefix(f"{task}_")))
    return pairs


def check_protocol(config: DictConfig) -> None:
    """Raise ConfigError unless the config's protocol is faithful or defined for its task and dataset."""
    protocol = config.get("protocol", DEFAULT)
    if protocol == DEFAULT:
        return
    task, dataset = str(config.task.name), str(config.dataset.name)
    pairs = defined(str(protocol))
    if (task, dataset) in pairs:
        return
    if not pairs:
        valid = ", ".join(group_options("protocol"))
        raise ConfigError(f"protocol={protocol} has no switches: valid protocols: {valid}")
    have = {}
    for defined_task, defined_dataset in pairs:
        have.setdefault(defined_task, []).append(defined_dataset)
    listed = "; ".join(f"experiment={name} (dataset={', '.join(have[name])})" for name in sorted(have))
    raise ConfigError(
        f"protocol={protocol} is not defined for task={task} on dataset={dataset}; it is defined for {listed}"
    )


def switches(protocol: str, task: str, dataset: str, encoder: str | None = None) -> dict[str, Any]:
    """The keys (dotted) that `protocol`'s files set for `task` and `dataset`, with their values: its switch file and,
    for `encoder`, its pair file (the switches of one encoder only). Nothing for protocol=faithful, which has none:
    its pair files hold settings tuned on its data path, which any run may override."""
    if protocol == DEFAULT:
        return {}
    found: dict[str, Any] = {}
    stems = [(SWITCHES, f"{protocol}_{task}_{dataset}")]
    if encoder is not None:
        stems.append((PAIRS, f"{protocol}_{task}_{dataset}_{encoder}"))
    for folder, stem in stems:
        path = files("igel_exp.conf").joinpath(*folder, f"{stem}.yaml")
        if path.is_file():
            found.update(_dotted(yaml.safe_load(path.read_text()) or {}))
    return found


def faithful_value(key: str, switched: Any) -> Any:
    """The value a switch key holds on the faithful path: the value it was added with (identity.ADDED_DEFAULTS), else
    the switch's own (a key that the protocol's file sets to the faithful value, to say so: task.ranking_graph)."""
    return ADDED_DEFAULTS.get(key, switched)


def held(config: DictConfig) -> dict[str, tuple[Any, dict[str, Any]]]:
    """The keys of the config's task and dataset (and encoder) that its protocol holds: every key its files set, or
    under protocol=faithful every key another protocol switches to another value. Each with the value the protocol holds
    it at, and (under faithful) the other protocols' values."""
    protocol = str(config.get("protocol", DEFAULT))
    task, dataset = str(config.task.name), str(config.dataset.name)
    encoder = config.get("encoder")
    encoder = None if encoder is None else str(encoder.name)
    if protocol != DEFAULT:
        return {key: (value, {}) for key, value in switches(protocol, task, dataset, encoder).items()}
    values: dict[str, tuple[Any, dict[str, Any]]] = {}
    for other in (option for option in group_options("protocol") if option != DEFAULT):
        for key, switched in switches(other, task, dataset, encoder).items():
            faithful = faithful_value(key, switched)
            if switched != faithful:  # not a file's note of a key both paths hold alike (task.ranking_graph)
                values.setdefault(key, (faithful, {}))[1][other] = switched
    return values


def overridden(config: DictConfig) -> dict[str, Any]:
    """The keys that the config's protocol holds (`held`) and an override set to another value, with those values."""
    changed = {}
    for key, (value, _) in sorted(held(config).items()):
        got = OmegaConf.select(config, key, default=_ABSENT)
        if got is not _ABSENT and got != value:
            changed[key] = got
    return changed


def label(config: DictConfig) -> str:
    """What a run ran, as its `igel.protocol` tag and its name say it: its protocol, or where overrides set some of
    its switches otherwise, `faithful with dataset.parallel_edges=true`, which no table counts as a protocol's run."""
    protocol = str(config.get("protocol", DEFAULT))
    changed = overridden(config) if "task" in config and "dataset" in config else {}  # igel-embed's has no task
    return f"{protocol} with {_settings(changed)}" if changed else protocol


def check_switches(config: DictConfig) -> None:
    """Raise ConfigError where an override sets a key that the config's protocol holds to another value (`overridden`):
    a table's job of neither path, which its protocol's column would count (igel-reproduce and igel-report)."""
    changed = overridden(config)
    if changed:
        raise ConfigError(f"{switched_otherwise(config, changed)}: leave {'it' if len(changed) == 1 else 'them'} out")


def switched_otherwise(config: DictConfig, changed: dict[str, Any]) -> str:
    """What the protocol holds that `changed` sets otherwise, and the protocol to run instead where one holds it so."""
    protocol = str(config.get("protocol", DEFAULT))
    expected = held(config)
    holds = ", ".join(f"{key}={shown_value(expected[key][0])}" for key in changed)
    where = f"task={config.task.name} on dataset={config.dataset.name}"
    if protocol == DEFAULT:
        switching = sorted({other for key in changed for other in expected[key][1]})
        holds = f"keeps {holds} for {where}, which protocol={', '.join(switching)} switches"
        # the protocol whose switches are the values given, if one's are
        instead = [other for other in switching if all(expected[key][1].get(other) == changed[key] for key in changed)]
    else:
        holds, instead = f"sets {holds} for {where}", [DEFAULT]
    otherwise = f" (or run protocol={instead[0]})" if instead else ""
    return f"protocol={protocol} {holds}; {_settings(changed)} makes a run of neither path{otherwise}"


def _settings(changed: dict[str, Any]) -> str:
    return ", ".join(f"{key}={shown_value(value)}" for key, value in changed.items())


def _dotted(mapping: dict, prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            flat.update(_dotted(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
