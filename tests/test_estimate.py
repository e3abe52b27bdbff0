"""The wall-time estimate of igel-reproduce --dry-run: the store's runs first, then the cost model."""

import pytest

from igel_exp.errors import ConfigError
from igel_exp.estimate import REUSE_S, Duration, Estimator, Kind, duration_text, load_kinds, work
from igel_exp.plan import load_plan

from conftest import REPO

TABLE = {"table": "Tiny", "rows": ["encoder.distance"], "columns": {"PageRank": "spearman_pagerank"}}
SKIPGRAM = {
    "trainer.objective": "skipgram",
    "trainer.epochs": 2,
    "trainer.walks_per_node": 3,
    "trainer.walk_length": 10,
    "trainer.window": 4,
    "trainer.negatives": 5,
}


def test_work_counts_walk_positions_times_their_scores():
    assert work(SKIPGRAM) == 2 * 3 * 10 * (2 * 4 + 5)
    assert work({**SKIPGRAM, "dataset.num_nodes": 100}) == 2 * 3 * 10 * 13 * 100
    supervised = {"trainer.objective": "supervised", "trainer.epochs": 1000, "trainer.patience": 100}
    assert work(supervised) == 150  # early stopping: patience epochs past an assumed best epoch
    assert work({**supervised, "trainer.epochs": 30}) == 30  # at most its epochs
    assert work({"trainer.objective": "supervised", "trainer.epochs": 1000}) == 1.0  # no patience: no estimate
    # as MLflow params: strings
    assert work({key: str(value) for key, value in SKIPGRAM.items()}) == 780


def params(plan_job, **changes) -> dict:
    return {key: str(value) for key, value in {**plan_job.flat, **changes}.items()}


def test_the_store_is_used_before_the_cost_model(experiments_dir):
    plan = load_plan(experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "range(2)"}, TABLE), "quick")
    one, two = plan.jobs[0], plan.jobs[2]  # distance 1 and 2, seed 0
    kinds = [Kind({"name": "clustering", "encoder.distance": 1}, 1.0, 0.5), Kind({"name": "clustering"}, 2.0, 1.0)]
    model = Estimator([], kinds)
    assert model.job(one) == (1.0 + 0.5 * work(one.flat), "the cost model (costs.yaml)")
    assert model.job(two) == (2.0 + work(two.flat), "the cost model (costs.yaml)")
    # runs of the same grid point (another seed): their median; of the same kind: their rate, scaled by work
    stored = [
        Duration(params(plan.jobs[1]), 7.0),  # distance 1, seed 1
        Duration(params(plan.jobs[1]), 9.0),
        Duration(params(plan.jobs[1]), 20.0),
        Duration(params(two, **{"trainer.epochs": 2}), 2.0 + 0.3 * work(two.flat) * 2),  # another point of kind 2
    ]
    model = Estimator(stored, kinds)
    assert model.job(one) == (9.0, "the store's runs of the same grid point")
    seconds, source = model.job(plan.jobs[3])  # distance 2, seed 1: no run of its point, one of its kind
    assert source == "the store's runs of its kind" and seconds == pytest.approx(2.0 + 0.3 * work(two.flat))
    total = model.jobs([one, two], extra=2)
    assert total.seconds == pytest.approx(9.0 + seconds + 2 * (9.0 + seconds) / 2)
    assert total.sources == {
        "the store's runs of the same grid point": 1,
        "the store's runs of its kind": 1,
        "the mean of the selection runs": 2,
    }
    assert Estimator([], []).job(one) == (None, "no estimate (a kind the cost model lacks)")


def test_the_shipped_cost_model_covers_every_table_of_the_paper():
    model = Estimator([], load_kinds())
    for path in sorted((REPO / "experiments").glob("*.yaml")):
        for job in load_plan(path, "quick").jobs:
            seconds, source = model.job(job)
            assert seconds is not None and seconds > 0, (path.name, job.shown, source)


def test_a_malformed_cost_model_fails_with_one_line():
    with pytest.raises(ConfigError, match="costs.yaml: kind 2 needs match, start_s and per_unit_s"):
        load_kinds("kinds:\n  - {match: {name: a}, start_s: 1, per_unit_s: 2}\n  - {match: {name: b}, start_s: 1}\n")


@pytest.mark.parametrize(
    "seconds, text", [(12.4, "12 s"), (600, "10 min"), (3900, "1 h 05 min"), (73200, "20 h 20 min")]
)
def test_durations_read_as_hours_and_minutes(seconds, text):
    assert duration_text(seconds) == text


def test_a_job_that_reuses_an_earlier_jobs_embeddings_costs_a_reuse(experiments_dir):
    table = {"table": "Tiny", "rows": ["encoder.distance", "task.k"], "columns": {"F1": "f1_cluster"}}
    sweep = {"encoder.distance": "1,2", "task.k": "5,6", "seed": "0"}  # α slowest: k = 5 trains, k = 6 reuses
    plan = load_plan(experiments_dir("sister", sweep, table, experiment="sister_cities"), "quick")
    model = Estimator([], [Kind({"name": "sister_cities"}, 30.0, 0.0)])
    total = model.jobs(plan.jobs)  # α = 1 trains at k = 5 and reuses at k = 6; α = 2 alike
    assert total.seconds == 2 * 30.0 + 2 * REUSE_S
    assert total.sources == {"the cost model (costs.yaml)": 2, "the reuse of an earlier job's embeddings": 2}
    # trained by a table above (or finished in the store): every job reuses
    trained: set[str] = set()
    model.jobs(plan.jobs[:1], trained=trained)
    assert model.jobs(plan.jobs[1:2], trained=trained).seconds == REUSE_S
    # a stored run that reused says nothing of a training's cost
    stored = Estimator([Duration(params(plan.jobs[1]), 4.0, reused=True)], [Kind({"name": "sister_cities"}, 1.0, 1.0)])
    assert stored.rates == {}
