"""The reproduction plan: an experiments/ file → the jobs of its sweep (full or quick profile), as Hydra runs them.

An experiments/<table>.yaml file is a Hydra primary config over the packaged `config` whose sweep is
`hydra.sweeper.params` and whose `reproduce:` block describes the paper's table (experiments/README.md).
The jobs are expanded with Hydra's own machinery, exactly as `igel-run -m --config-dir experiments
--config-name <table> [args]` would: the sweep params, then the profile's replacements and extra overrides,
then the user's overrides, parsed by Hydra's override parser and crossed by its basic sweeper (a later
override of a key replaces the earlier one in place, so the first key still varies slowest). Each job's
config is composed with the compose API over the same search path, so it has the same identity
(igel_exp.identity) as the run `igel-run -m` makes of it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.resources
import logging
import os
import pickle
import re
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.object_type import ObjectType
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from igel_exp import user_cache_dir, write_cache_entry
from igel_exp.errors import ConfigError, first_line, yaml_problem
from igel_exp.identity import NOT_IDENTITY, PACKAGE, config_hash, source_fingerprint
from igel_exp.protocol import DEFAULT as DEFAULT_PROTOCOL
from igel_exp.protocol import check_protocol, check_switches
from igel_exp.schema import check, describe, group_options, override_keys, refuse_option_names
from igel_exp.tracking import flatten

log = logging.getLogger(__name__)

PROFILES = ("full", "quick")
PACKAGED_CONFIGS = "pkg://igel_exp.conf"  # where the experiments' `defaults: [config, ...]` comes from
SELECT_MODES = ("max", "min")


@dataclass(frozen=True)
class Column:
    """A column of the paper's table: an MLflow metric, optionally of the runs whose params match `where`."""

    title: str
    metric: str
    where: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Select:
    """The best grid point per cell: on `metric` (a validation metric), averaged over seeds first.

    With `seeds`, select then confirm: the grid's points run on those seeds only and are compared on them; the
    chosen point of each cell then runs on the sweep's other seeds, and the cell reports it over all of them.
    """

    metric: str
    mode: str = "max"
    seeds: tuple[int, ...] = ()  # empty: every point runs on every seed


VERDICT_KEYS = ("authors", "ruled_out")
# a reproduce.paper entry's count of the runs its values average (1 when absent: one run, as most of the paper's tables)
PAPER_RUNS = "runs"


@dataclass
class Spec:
    """An experiments/ file's `reproduce:` block, checked."""

    table: str
    caption: str
    rows: list[str]
    columns: list[Column]
    select: Select | None
    paper: list[dict[str, Any]]
    quick: dict[str, Any] | None
    verdict: dict[str, str] = field(default_factory=dict)  # `authors`: why only the authors' path matches
    skip: list[dict[str, Any]] = field(default_factory=list)  # jobs of the sweep the table does not run (their params)
    # what was ruled out: one reason of every protocol (a plain `ruled_out: WHAT`), or a reason per protocol
    ruled_out: str | dict[str, str] | None = None

    def ruled_out_of(self, protocols: Sequence[str]) -> list[tuple[str | None, str]]:
        """The reasons ruled out that belong to `protocols` (those a verdict speaks about), each with its protocol, in
        their order; one (None, WHAT) for a reason of every protocol."""
        if isinstance(self.ruled_out, str):
            return [(None, self.ruled_out)]
        reasons = self.ruled_out or {}
        return [(protocol, reasons[protocol]) for protocol in protocols if protocol in reasons]


@dataclass(frozen=True)
class Job:
    """One run of the sweep: its Hydra overrides, its composed config and its identity."""

    overrides: tuple[str, ...]  # as igel-run -m passes them to the job
    shown: str  # the overrides that tell this job from the others of the plan (messages)
    packed: bytes = field(repr=False)  # the composed config, pickled: see `config`
    flat: dict[str, Any]  # the resolved config as flattened keys (rows and column filters read it)
    hash: str  # identity: the MLflow tag igel.config_hash of its run
    point: str  # identity without the seed: the grid point whose seeds are aggregated

    @functools.cached_property
    def config(self) -> DictConfig:
        """The composed config, unpickled where it is read: a report reads the jobs' flat keys only, and a plan read
        back from the plan cache (cached_plan) costs 0.04 s where its 819 DictConfigs took 2.9 s."""
        return pickle.loads(self.packed)


@dataclass
class Plan:
    """The jobs that reproduce one experiments/ file under one profile."""

    name: str  # the file's stem
    path: Path
    profile: str
    spec: Spec
    jobs: list[Job]
    arguments: list[str]  # the sweep as igel-run -m arguments: params, profile replacements, overrides
    skipped: int = 0  # jobs of the sweep that reproduce.skip leaves out
    overrides: list[str] = field(default_factory=list)  # the command's own, last of `arguments`

    @property
    def setting_overrides(self) -> list[str]:
        """The command's overrides that change the runs, not where or how they run (`threads=1`, `tracking.uri=…`,
        `data.root=…`, `hydra/launcher=joblib`: identity.NOT_IDENTITY and Hydra's own), which the same table shows."""
        return [item for item in self.overrides if not _where_or_how(item)]

    @property
    def experiments(self) -> list[str]:
        """The MLflow experiments the jobs log to."""
        return sorted({str(job.flat["name"]) for job in self.jobs})

    @property
    def command(self) -> str:
        """The equivalent igel-run command line, quoted as a shell reads it back (a folder with spaces, the quotes of
        task.source_overrides=['trainer.epochs=1'])."""
        return shlex.join(
            ["igel-run", "-m", "--config-dir", str(self.path.parent), "--config-name", self.name, *self.arguments]
        )

    def row_key(self, job: Job) -> tuple:
        return tuple(job.flat.get(key) for key in self.spec.rows)

    def selects(self, job: Job) -> bool:
        """Whether the job is one of those that compare the grid's points (all of them, but for select.seeds)."""
        select = self.spec.select
        return select is None or not select.seeds or job.flat.get("seed") in select.seeds

    @property
    def protocols(self) -> list[str]:
        """The protocols the jobs run (conf/protocol), faithful first: each gets its own column of ours."""
        found = {protocol_of(job): None for job in self.jobs}
        return sorted(found, key=lambda protocol: protocol != DEFAULT_PROTOCOL) or [DEFAULT_PROTOCOL]


def protocol_of(job: Job) -> str:
    return str(job.flat.get("protocol", DEFAULT_PROTOCOL))


def default_experiments_dir() -> Path:
    """The paper's reproduction plans, shipped with the package as `igel_exp.experiments` (experiments/ of the
    source tree, which an editable install maps in place): an installed igel-reproduce finds them from any folder."""
    folder = Path(importlib.resources.files("igel_exp.experiments"))
    if not any(folder.glob("*.yaml")):
        raise ConfigError(f"{folder}: the installed package has no reproduction plans; pass --experiments DIR")
    return folder


def table_files(folder: Path, selectors: Sequence[str] = ("all",)) -> list[Path]:
    """The experiments/ files named by `selectors` (a file's name, .yaml or not, a paper table label, or `all`), in
    order."""
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such experiments folder")
    documents, unreadable = {}, {}
    for path in sorted(folder.glob("*.yaml")):
        try:
            documents[path] = OmegaConf.load(path) or {}
        except yaml.YAMLError as error:
            unreadable[path] = yaml_problem(error)
        except (OSError, ValueError) as error:  # not UTF-8, a dangling link, a folder
            unreadable[path] = f"{path}: cannot read it ({first_line(error)})"
    files = [path for path, document in documents.items() if "reproduce" in document]
    for path, message in unreadable.items():  # the other tables still print
        if {path.stem, path.name} & set(selectors):  # broken.yaml said: no table 'broken.yaml'
            raise ConfigError(message)
        log.warning("%s; skipped", message)
    if not files:
        raise ConfigError(f"{folder}: no experiments file with a reproduce: block")
    labels = {path: str(documents[path].reproduce.get("table", "")) for path in files}
    chosen: list[Path] = []
    for selector in selectors or ("all",):
        if selector.lower() == "all":  # as labels are: ALL said no table
            matches = files
        else:
            matches = [path for path in files if selector in (path.stem, path.name)] or [
                path for path in files if labels[path].lower() == selector.lower()
            ]
        if not matches:
            valid = ", ".join(path.stem for path in files)
            named = ", ".join(dict.fromkeys(label for label in labels.values() if label))  # a label may select several
            raise ConfigError(
                f"no table {selector!r} in {folder}; valid tables: all, {valid}"
                + (f"; or a paper label: {named}" if named else "")
            )
        chosen += [path for path in matches if path not in chosen]
    return chosen


def load_plan(path: Path, profile: str = "full", overrides: Sequence[str] = ()) -> Plan:
    """Expand the sweep of experiments/`path` under `profile`, with `overrides` for every job (sweeps allowed)."""
    if profile not in PROFILES:
        raise ConfigError(f"profile {profile!r} is not one of {', '.join(PROFILES)}")
    path = Path(path).resolve()
    with initialize_config_dir(config_dir=str(path.parent), version_base="1.3", job_name="igel-reproduce"):
        composer = _Composer(path.stem)
        spec = parse_spec(composer.reproduce, path.name)
        params, extra = dict(composer.sweep), []
        if profile == "quick":
            if spec.quick is None:
                raise ConfigError(f"{path.name}: reproduce.quick is missing: the file has no quick profile")
            params.update(spec.quick.get("params") or {})  # a replaced key keeps its place in the sweep's order
            extra = [str(value) for value in spec.quick.get("overrides") or []]
        arguments = [f"{key}={value}" for key, value in params.items()] + extra  # as Hydra's BasicSweeper does
        arguments += list(overrides)
        try:  # dataset.name=facebook would run the file's dataset option's settings on Facebook (schema)
            refuse_option_names(override_keys(overrides))
        except ConfigError as error:
            raise ConfigError(f"{path.name}: {error}") from None
        except HydraException:  # an override Hydra cannot parse: _expand says so
            pass
        batches = _expand(arguments, path.name, composer.search)
        if not batches:  # igel-run -m says the same of it
            raise ConfigError(f"{path.name}: the sweep has no jobs (a sweep over an empty range or list?)")
        shown_keys = _varying_keys(batches) or [_key(argument) for argument in arguments]
        jobs, seen, skipped, keys = [], set(), 0, set()
        for batch in batches:
            config = composer.job(batch)
            try:
                check(config)  # the ranges; what needs torch or the data is checked before the jobs run
                check_protocol(config)
                check_switches(config)
            except ConfigError as error:
                raise ConfigError(f"{path.name} with {shown(batch)}: {error}") from None
            resolved = OmegaConf.to_container(config, resolve=True, enum_to_str=True)  # once: a third of a job's cost
            identity = config_hash(resolved)
            if identity in seen:  # two sweep values that compose the same run
                continue
            seen.add(identity)
            flat = flatten(resolved)
            keys.update(flat)
            if any(matches(flat, where) for where in spec.skip):
                skipped += 1
                continue
            jobs.append(
                Job(
                    overrides=tuple(batch),
                    shown=" ".join(item for item in batch if _key(item) in shown_keys),
                    packed=pickle.dumps(config, pickle.HIGHEST_PROTOCOL),
                    flat=flat,
                    hash=identity,
                    point=config_hash(resolved, without=("seed",)),
                )
            )
    for key in (key for where in spec.skip for key in where):
        if key not in keys:  # a misspelled key would skip nothing, while the table's caption says it did
            raise ConfigError(f"{path.name}: {key!r} (in reproduce.skip) is not a config key of its runs")
    if skipped and not jobs:  # not its rows' fault: the table has no run of these overrides
        given = f" with {shown(overrides)}" if overrides else ""
        raise ConfigError(f"{path.name}: reproduce.skip leaves out every job of the sweep{given}: nothing to run")
    plan = Plan(path.stem, path, profile, spec, jobs, arguments, skipped, list(overrides))
    check_cells(plan)
    return plan


def _where_or_how(override: str) -> bool:
    """Whether an override sets a key outside the runs' identity (identity.NOT_IDENTITY) or Hydra's own."""
    key = re.split(r"[=/]", override.lstrip("+~"), maxsplit=1)[0]
    return any(key == other or key.startswith(f"{other}.") for other in (*NOT_IDENTITY, "hydra"))


PLAN_CACHE_FORMAT = 2  # raised when a Plan's pickled form changes
PLAN_CACHE_ENTRIES = 64  # the newest entries kept (a few kB to 4 MB each)


def cached_plan(path: Path, profile: str = "full", overrides: Sequence[str] = ()) -> Plan:
    """load_plan's plan, kept in the user's cache (plans/): the paper's tables expand to 819 jobs of Hydra compositions,
    ~25 s of every igel-report on a 2-core machine, which read back in a tenth of a second. An entry holds the
    fingerprint of all the plan is made of (_fingerprint); a plan whose fingerprint differs (an edited experiments/ or
    config file, another igel-exp, Hydra or OmegaConf, another value of a variable the configs read) is expanded
    anew. Errors are not kept: a bad file or override fails as it did."""
    path = Path(path).resolve()
    question = repr((str(path), profile, list(overrides)))
    if "searchpath" in question:  # configs from folders the fingerprint does not read
        return load_plan(path, profile, overrides)
    entry = user_cache_dir() / "plans" / f"{hashlib.sha256(question.encode()).hexdigest()[:32]}.pickle"
    fingerprint = _fingerprint(path.parent, question)
    try:
        kept, plan = pickle.loads(entry.read_bytes())
        if kept == fingerprint:
            return plan
    except Exception:  # absent, unreadable, of another format: expanded anew, as without the cache
        pass
    plan = load_plan(path, profile, overrides)
    write_cache_entry(entry, pickle.dumps((fingerprint, plan), pickle.HIGHEST_PROTOCOL), PLAN_CACHE_ENTRIES)
    return plan


def _fingerprint(experiments: Path, question: str) -> str:
    """What a plan is made of: the package's code (identity.source_fingerprint, read once a process: all but the
    evaluators and figures, which no plan reads), its packaged configs and the experiments folder's, the Python, Hydra
    and OmegaConf versions, the environment variables the configs read (oc.env) and the question."""
    digest = hashlib.sha256(f"{PLAN_CACHE_FORMAT} {sys.version} {question}".encode())
    for package in ("hydra-core", "omegaconf"):
        digest.update(importlib.metadata.version(package).encode())
    digest.update(source_fingerprint(PACKAGE).encode())
    texts = [question.encode()]
    for root in map(Path, [importlib.resources.files("igel_exp.conf"), experiments]):
        for file in (file for file in sorted(root.rglob("*.yaml")) if file.is_file()):
            try:
                texts.append(file.read_bytes())
            except OSError as error:  # load_plan skips it, saying why: its state is its error
                texts.append(repr(error).encode())
            digest.update(f"\0{file}\0{len(texts[-1])}\0".encode() + texts[-1])
    for name in sorted(set(re.findall(rb"oc\.env:\s*(\w+)", b"\n".join(texts)))):
        digest.update(repr((name, os.environ.get(name.decode()))).encode())
    return digest.hexdigest()


def parse_spec(block: Mapping[str, Any] | None, where: str) -> Spec:
    """The `reproduce:` block as a Spec; a malformed one raises ConfigError naming the key."""
    if not isinstance(block, Mapping):
        raise ConfigError(f"{where}: no reproduce: block")
    for key in ("table", "columns"):
        if not block.get(key):
            raise ConfigError(f"{where}: reproduce.{key} is missing")
    rows = block.get("rows") or []
    if isinstance(rows, str) or not all(isinstance(row, str) for row in rows):
        raise ConfigError(f"{where}: reproduce.rows must be a list of config keys, got {rows!r}")
    columns = []
    for title, value in block["columns"].items():
        if isinstance(value, str):
            columns.append(Column(str(title), value))
        elif isinstance(value, Mapping) and isinstance(value.get("metric"), str):
            columns.append(Column(str(title), value["metric"], {k: v for k, v in value.items() if k != "metric"}))
        else:
            raise ConfigError(
                f"{where}: reproduce.columns.{title} must be a metric name or {{metric: NAME, <param>: value}}"
            )
    select = None
    if block.get("select") is not None:
        choice = block["select"]
        if not isinstance(choice, Mapping) or not isinstance(choice.get("metric"), str):
            raise ConfigError(f"{where}: reproduce.select must be {{metric: NAME, mode: max|min, seeds: [...]}}")
        seeds = choice.get("seeds") or []
        if isinstance(seeds, str) or not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in seeds):
            raise ConfigError(f"{where}: reproduce.select.seeds must be a list of seeds, got {seeds!r}")
        select = Select(choice["metric"], choice.get("mode", "max"), tuple(seeds))
        if select.mode not in SELECT_MODES:
            raise ConfigError(f"{where}: reproduce.select.mode={select.mode!r} is not one of max, min")
        if select.metric.startswith("test"):
            # the paper chose on validation data; choosing on the test metric would overstate every cell
            raise ConfigError(
                f"{where}: reproduce.select.metric={select.metric} is a test metric: select on validation"
            )
    titles = {column.title for column in columns}
    if PAPER_RUNS in titles:
        raise ConfigError(f"{where}: reproduce.columns.{PAPER_RUNS}: the title is reserved for reproduce.paper entries")
    paper = [dict(entry) for entry in block.get("paper") or []]
    for number, entry in enumerate(paper, 1):
        absent = [key for key in rows if key not in entry]
        unknown = [key for key in entry if key not in rows and key not in titles and key != PAPER_RUNS]
        if absent or unknown:
            problem = f"lacks the row keys {absent}" if absent else f"has {unknown}, neither row keys nor column titles"
            raise ConfigError(f"{where}: reproduce.paper entry {number} {problem}")
        for title in titles & set(entry):
            value = entry[title]
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise ConfigError(f"{where}: reproduce.paper entry {number}: {title}={value!r} is not a number")
        runs = entry.get(PAPER_RUNS, 1)
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise ConfigError(f"{where}: reproduce.paper entry {number}: {PAPER_RUNS}={runs!r} is not a count of runs")
    quick = block.get("quick")
    if quick is not None and not isinstance(quick, Mapping):
        raise ConfigError(f"{where}: reproduce.quick must be {{params: {{...}}, overrides: [...]}}")
    verdict = block.get("verdict") or {}
    if not isinstance(verdict, Mapping) or not set(verdict) <= set(VERDICT_KEYS):
        raise ConfigError(
            f"{where}: reproduce.verdict must be {{authors: WHY, ruled_out: WHAT}} (or ruled_out:"
            f" {{<protocol>: WHAT}}), got {verdict!r}"
        )
    ruled_out = _ruled_out(verdict.get("ruled_out"), where)
    skip = block.get("skip") or []
    if isinstance(skip, str | Mapping) or not all(isinstance(entry, Mapping) and entry for entry in skip):
        raise ConfigError(f"{where}: reproduce.skip must be a list of {{<param>: value, ...}}, got {skip!r}")
    return Spec(
        str(block["table"]),
        str(block.get("caption", "")),
        list(rows),
        columns,
        select,
        paper,
        dict(quick) if quick is not None else None,
        {key: str(value) for key, value in verdict.items() if key != "ruled_out"},
        [dict(entry) for entry in skip],
        ruled_out,
    )


def _ruled_out(value: Any, where: str) -> str | dict[str, str] | None:
    """reproduce.verdict.ruled_out: WHAT (or a list of them), reasons of every protocol, or {<protocol>: WHAT, ...},
    reasons that hold on one protocol's path only (a verdict of one protocol's runs must not give another's)."""
    if value is None or isinstance(value, str | int | float) and not isinstance(value, bool):
        return None if value is None else str(value)
    if isinstance(value, list) and value and all(isinstance(reason, str) for reason in value):
        return "; ".join(value)  # a list of reasons of every protocol (it printed as a Python list)
    protocols = group_options("protocol")
    if not isinstance(value, Mapping) or not value or not set(value) <= set(protocols):
        raise ConfigError(
            f"{where}: reproduce.verdict.ruled_out must be WHAT (of every protocol) or {{<protocol>: WHAT, ...}} of the"
            f" protocols {', '.join(protocols)}, got {value!r}"
        )
    for protocol, reason in value.items():
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(
                f"{where}: reproduce.verdict.ruled_out.{protocol} must be a reason (text), got {reason!r}"
            )
    return {str(protocol): reason for protocol, reason in value.items()}


def check_cells(plan: Plan) -> None:
    """Every cell must be one grid point, unless the file says how to choose one (select)."""
    keys = set().union(*(job.flat for job in plan.jobs)) if plan.jobs else set()
    for key in [*plan.spec.rows, *(k for column in plan.spec.columns for k in column.where)]:
        if key not in keys:
            raise ConfigError(
                f"{plan.path.name}: {key!r} (in reproduce.rows or columns) is not a config key of its runs"
            )
    if plan.spec.select is not None:
        chosen, swept = list(plan.spec.select.seeds), {job.flat.get("seed") for job in plan.jobs}
        if chosen and not swept & set(chosen):
            raise ConfigError(f"{plan.path.name}: none of reproduce.select.seeds {chosen} is a seed of its sweep")
        return
    for column in plan.spec.columns:
        cells: dict[tuple, set[str]] = {}
        for job in plan.jobs:
            if matches(job.flat, column.where):
                cells.setdefault((plan.row_key(job), protocol_of(job)), set()).add(job.point)
        for (row, _), points in cells.items():
            if len(points) > 1:
                label = ", ".join(f"{key}={value}" for key, value in zip(plan.spec.rows, row, strict=True))
                raise ConfigError(
                    f"{plan.path.name}: the cell ({label or 'all'}; {column.title}) holds {len(points)} grid points: "
                    "add the swept keys to reproduce.rows or a column filter, or a reproduce.select"
                )


def matches(flat: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    """Whether a run's flattened config has the values `where` asks for."""
    return all(key in flat and same_value(flat[key], value) for key, value in where.items())


def same_value(ours: Any, theirs: Any) -> bool:
    """Config values as YAML gives them: 1 matches 1.0, `true` matches True, anything else by its text."""
    if isinstance(ours, bool) or isinstance(theirs, bool):
        return ours is theirs or str(ours).lower() == str(theirs).lower()
    if isinstance(ours, int | float) and isinstance(theirs, int | float):
        return float(ours) == float(theirs)
    return str(ours) == str(theirs)


class _Composer:
    """Composes job configs of one primary config; configs that differ only in plain values share a composition.

    Hydra composes a config from its defaults list (the config-group choices) and then applies every other
    override as a value (ConfigLoaderImpl._apply_overrides_to_config). Doing the same here, once per set of
    group choices, turns a few hundred ~0.2 s compositions of a large grid into a handful; a job whose value
    overrides cannot be applied that way is composed in full, so the result is always Hydra's.
    """

    def __init__(self, name: str, search: Sequence[str] = (f"hydra.searchpath=[{PACKAGED_CONFIGS}]",)):
        self.name = name
        self.search = list(search)  # the packaged configs' place, as hydra.searchpath overrides
        try:
            full = compose(config_name=name, overrides=self.search, return_hydra_config=True)
        except (HydraException, OmegaConfBaseException) as error:
            raise ConfigError(f"{name}.yaml: {describe(error)}") from None
        params = full.hydra.sweeper.get("params")
        self.sweep: dict[str, Any] = OmegaConf.to_container(params, resolve=False) if params else {}
        self.reproduce = OmegaConf.to_container(full.reproduce, resolve=True) if full.get("reproduce") else None
        self._groups = set(full.hydra.runtime.choices.keys())
        with open_dict(full):  # less its hydra node, as compose() returns it: the base of jobs without group choices
            del full["hydra"]
        self._bases: dict[tuple[str, ...], DictConfig] = {(): full}
        self._parser = OverridesParser.create()

    def _is_value(self, override: Override) -> bool:
        plain = override.package is None and not (override.is_add() or override.is_force_add() or override.is_delete())
        key = override.key_or_group
        return plain and key not in self._groups and not key.startswith("hydra.") and key != "hydra"

    def job(self, overrides: Sequence[str]) -> DictConfig:
        parsed = self._parser.parse_overrides(list(overrides))
        values = [override for override in parsed if self._is_value(override)]
        structure = tuple(override.input_line for override in parsed if not self._is_value(override))
        try:
            if structure not in self._bases:
                self._bases[structure] = self._compose(list(structure))
            # a copy through pickle: the same config as copy.deepcopy's at a third of its cost (OmegaConf copies node
            # by node in Python; a job's config is mostly its file's reproduce: block)
            config = pickle.loads(pickle.dumps(self._bases[structure]))
            ConfigLoaderImpl._apply_overrides_to_config(values, config)
            return config
        except (HydraException, OmegaConfBaseException):
            return self._compose(list(overrides))

    def _compose(self, overrides: list[str]) -> DictConfig:
        try:
            return compose(config_name=self.name, overrides=[*self.search, *overrides])
        except (HydraException, OmegaConfBaseException) as error:
            raise ConfigError(f"{self.name}.yaml with {shown(overrides)}: {describe(error)}") from None


@dataclass(frozen=True)
class SweepJobs:
    """The jobs of a sweep, each job's overrides and its config, composed as they are iterated; len() is how many."""

    batches: list[list[str]]
    composer: _Composer

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[tuple[list[str], DictConfig]]:
        return ((batch, self.composer.job(batch)) for batch in self.batches)


def sweep_jobs(config: DictConfig) -> SweepJobs:
    """The jobs of the running `igel-run -m` as Hydra's basic sweeper will launch them. `config` is the sweep's own,
    with its hydra node; call it inside the Hydra app."""
    params = config.hydra.sweeper.get("params") or {}
    arguments = [f"{key}={value}" for key, value in params.items()] + list(config.hydra.overrides.task)
    search = [item for item in config.hydra.overrides.hydra if item.startswith("hydra.searchpath")]
    batches = _expand(arguments, "the sweep", search)
    _refuse_repeats(arguments, search)
    return SweepJobs(batches, _Composer(config.hydra.job.config_name, search))


def _expand(arguments: list[str], where: str, search: Sequence[str] = ()) -> list[list[str]]:
    """Hydra's basic sweeper: the cross product of the sweeps, one override list per job, first key slowest; `search`,
    the hydra.searchpath overrides its jobs are composed with, lists a group's options to glob(). An argument it cannot
    expand is named (`seed=range(0,3,0)`: Python's ValueError, which named nothing)."""
    try:
        return _cross(arguments, search)
    except SWEEP_ERRORS as error:
        culprit = next((argument for argument in arguments if not _expands(argument, search)), None)
        raise ConfigError(f"{where}: {f'{shown([culprit])}: ' if culprit else ''}{describe(error)}") from None


SWEEP_ERRORS = (HydraException, ValueError)


def _cross(arguments: list[str], search: Sequence[str] = ()) -> list[list[str]]:
    [batches] = BasicSweeper.split_arguments(_parsed(arguments, search), None)
    return batches


def _parsed(arguments: list[str], search: Sequence[str] = ()) -> list[Override]:
    # the config loader lists a group's options for glob() (`encoder=glob(deep*)`: "ConfigLoader is not set")
    hydra = GlobalHydra.instance()
    loader = _GroupOptions(hydra.config_loader(), search) if hydra.is_initialized() else None
    return OverridesParser.create(config_loader=loader).parse_overrides(arguments)


class _GroupOptions:
    """The config loader as glob() asks it for a group's options, with the search path the jobs are composed with: an
    experiments file of igel-reproduce names the packaged groups through `hydra.searchpath` (the loader's own search
    path is the experiments folder), so `encoder=glob(deep*)` there globbed no option: an empty sweep."""

    def __init__(self, loader: Any, search: Sequence[str]):
        self.loader, self.search = loader, list(search)

    def get_group_options(self, group_name: str, results_filter: ObjectType = ObjectType.CONFIG, **_: Any) -> list[str]:
        return self.loader.get_group_options(group_name, results_filter, overrides=self.search)


def _refuse_repeats(arguments: list[str], search: Sequence[str] = ()) -> None:
    """ConfigError where a sweep lists a value twice (`seed=1,1`): Hydra's basic sweeper would run that job twice, two
    MLflow runs of one config. igel-reproduce's plans drop such jobs (one run per config hash) instead."""
    for argument, override in zip(arguments, _parsed(arguments, search), strict=True):
        if override.is_sweep_override():
            # Hydra's job values (1e-1 is 0.1), as typed (false, not False)
            values = [shown([f"={value}"])[1:] for value in override.sweep_string_iterator()]
            twice = next((value for i, value in enumerate(values) if value in values[:i]), None)
            if twice is not None:
                raise ConfigError(f"the sweep: {shown([argument])}: {twice} is listed twice (each job runs once)")


def _expands(argument: str, search: Sequence[str] = ()) -> bool:
    try:
        _cross([argument], search)
    except SWEEP_ERRORS:
        return False
    return True


def shown(overrides: Sequence[str]) -> str:
    """A job's overrides as one types them: Hydra's sweep expansion escapes the characters of its grammar in each value
    (`tracking.uri=sqlite\\:///runs.db`) and writes booleans as Python does (`data.download=False`), which an error
    line should not show."""
    typed = (re.sub(r"=(True|False)$", lambda bool_: bool_[0].lower(), override) for override in overrides)
    return " ".join(re.sub(r"\\(.)", r"\1", override) for override in typed)


def _key(override: str) -> str:
    return override.split("=", 1)[0]


def _varying_keys(batches: list[list[str]]) -> list[str]:
    values: dict[str, set[str]] = {}
    for batch in batches:
        for override in batch:
            values.setdefault(_key(override), set()).add(override)
    return [key for key, seen in values.items() if len(seen) > 1]
