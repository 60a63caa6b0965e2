"""The rubric's weights as one value: checked once (`rubrics.Weights`, the context family's
`ContextWeights`), then passed unchanged to the rubric and to every planner that searches by it,
from the CLI, the Gymnasium envs and the verifiers taskset; and the defect that made it needed:
under custom weights the bound searched under the default ones, and scored below policies of its
own pool (`test_custom_weights_bound.py`)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.serving.jobs import EpisodeJob
from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.limits import MAX_WEIGHT
from kv_cache_env.policies import available, create, optimises
from kv_cache_env.sim import Simulator, get_scenario
from rubrics import COMPONENTS, DEFAULT_WEIGHTS, WeightError, Weights, score
from rubrics.context import CONTEXT_WEIGHTS, ContextWeights

LATENCY_FIRST = {"latency_penalty": 3.0, "failure_penalty": 0.1}
"""Weights that favour latency: with them the bound of the default weights scored below a policy
of its own pool on 4 of 6 episodes of agent-tools and chat-human (seeds 0-2)."""


def test_weights_are_one_frozen_hashable_picklable_value():
    w = Weights(LATENCY_FIRST)
    assert list(w) == list(COMPONENTS)  # every component, in the rubric's order
    assert (
        w["latency_penalty"] == 3.0
        and w["throughput_reward"] == DEFAULT_WEIGHTS["throughput_reward"]
    )
    assert w == Weights({"failure_penalty": 0.1, "latency_penalty": 3}) == dict(w)
    assert hash(w) == hash(Weights(dict(w))) and w != DEFAULT_WEIGHTS
    assert pickle.loads(pickle.dumps(w)) == w  # jobs carry it into worker processes
    assert w.overrides() == {"failure_penalty": 0.1, "latency_penalty": 3.0}
    assert repr(w) == "Weights({'failure_penalty': 0.1, 'latency_penalty': 3.0})"
    assert not w.is_default and DEFAULT_WEIGHTS.is_default and Weights() == DEFAULT_WEIGHTS
    # an override equal to the default is the default: one value, one record in run.json
    same = Weights({"failure_penalty": DEFAULT_WEIGHTS["failure_penalty"]})
    assert same.is_default and same.overrides() == {} and hash(same) == hash(DEFAULT_WEIGHTS)
    with pytest.raises(AttributeError, match="frozen"):
        w._values = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        w["latency_penalty"] = 1.0  # type: ignore[index]


@pytest.mark.parametrize(
    ("overrides", "key", "message"),
    [
        ({"speed": 1.0}, "speed", "unknown rubric component 'speed'; known: failure_penalty,"),
        ({3: 1.0}, 3, "unknown rubric component 3"),
        ({"failure_penalty": "3"}, "failure_penalty", 'failure_penalty must be a number, got "3"'),
        ({"failure_penalty": None}, "failure_penalty", "must be a number, got null"),
        ({"failure_penalty": True}, "failure_penalty", "must be a number, got true"),
        ({"failure_penalty": float("nan")}, "failure_penalty", "must be finite .* got NaN"),
        ({"failure_penalty": float("-inf")}, "failure_penalty", "got -Infinity"),
        ({"failure_penalty": 10**400}, "failure_penalty", r"at most 1e\+06 in size"),
        ({"failure_penalty": MAX_WEIGHT * 1.5}, "failure_penalty", "at most"),
        ([("failure_penalty", 1.0)], None, "weights must map rubric components to numbers"),
    ],
)
def test_a_refused_weight_names_its_key(overrides, key, message):
    with pytest.raises(WeightError, match=message) as caught:
        Weights(overrides)
    assert caught.value.key == key and isinstance(caught.value, ValueError)


def test_the_size_limit_itself_is_accepted():
    assert Weights({"failure_penalty": -MAX_WEIGHT})["failure_penalty"] == -MAX_WEIGHT


def test_the_context_family_is_checked_by_the_same_constructor():
    assert dict(CONTEXT_WEIGHTS) == {"answer_quality": 1.0, "oom_penalty": 0.05, "recall_cost": 1.0}
    assert ContextWeights({"oom_penalty": 1}).overrides() == {"oom_penalty": 1.0}
    with pytest.raises(WeightError, match="unknown context component 'latency_penalty'"):
        ContextWeights({"latency_penalty": 1.0})
    with pytest.raises(WeightError, match="oom_penalty must be finite"):
        ContextWeights({"oom_penalty": float("inf")})
    assert ContextWeights() != Weights()


def test_score_takes_only_the_checked_value():
    sim = Simulator(get_scenario("easy"), 0)
    while not sim.done:
        sim.play_turn([])
    record = sim.record()
    scored = score(record, Weights(LATENCY_FIRST))
    assert scored.weights == Weights(LATENCY_FIRST)
    expected = sum(Weights(LATENCY_FIRST)[k] * scored.components[k] for k in COMPONENTS)
    assert scored.reward == pytest.approx(expected)
    with pytest.raises(TypeError, match=r"takes rubrics\.Weights"):
        score(record, LATENCY_FIRST)  # type: ignore[arg-type]


def test_planners_are_built_with_the_weights_and_other_policies_ignore_them():
    w = Weights(LATENCY_FIRST)
    planners = {name for name in available() if optimises(name)}
    assert planners == {"bound", "expert", "lookahead"}
    for name in available():
        policy = create(name, w)
        # every policy that reads the simulator searches by the rubric: none may miss the weights
        assert policy.optimises == policy.needs_simulator == (name in planners), name
        if name in planners:
            assert policy.weights is w  # type: ignore[attr-defined]
            assert create(name).weights is DEFAULT_WEIGHTS  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="unknown policy"):
        optimises("nope")


def test_episode_jobs_carry_the_value():
    job = EpisodeJob("bound", EpisodeSpec("easy", 0), Weights(LATENCY_FIRST))
    assert pickle.loads(pickle.dumps(job)) == job and hash(job) == hash(
        pickle.loads(pickle.dumps(job))
    )
    with pytest.raises(TypeError, match=r"rubrics\.Weights"):
        EpisodeJob("bound", EpisodeSpec("easy", 0), (("latency_penalty", 3.0),))  # type: ignore[arg-type]


def test_the_gymnasium_envs_hold_the_checked_value():
    pytest.importorskip("gymnasium")
    from kv_cache_env.rl.gym import ServingEnv
    from kv_cache_env.rl.gym_vector import ServingTurnsVectorEnv

    assert ServingEnv(scenario="easy").weights == DEFAULT_WEIGHTS
    env = ServingEnv(scenario="easy", weights=LATENCY_FIRST)
    assert isinstance(env.weights, Weights) and env.weights == Weights(LATENCY_FIRST)
    vec = ServingTurnsVectorEnv(2, scenario="easy", weights=Weights(LATENCY_FIRST))
    assert vec.weights == Weights(LATENCY_FIRST)
    vec.close()


def test_the_verifiers_taskset_checks_its_reward_weights_as_one_value():
    pytest.importorskip("verifiers")
    from pydantic import ValidationError

    from kv_cache_env.taskset import KvCacheTaskConfig

    assert KvCacheTaskConfig().weights == DEFAULT_WEIGHTS
    config = KvCacheTaskConfig(rewards={"latency_penalty": {"weight": 3.0}})
    assert config.weights == Weights({"latency_penalty": 3.0})
    with pytest.raises(ValidationError, match=r"latency_penalty must be finite and at most 1e\+06"):
        KvCacheTaskConfig(rewards={"latency_penalty": {"weight": 1e300}})


def test_run_json_records_the_weights_that_differ_from_the_default(tmp_path: Path):
    runner = CliRunner()
    base = ["eval", "-p", "noop", "-s", "easy", "-n", "1", "--steps", "2", "-j", "1"]
    default = json.dumps({"failure_penalty": DEFAULT_WEIGHTS["failure_penalty"]})
    done = runner.invoke(app, [*base, "--weights", default, "-o", str(tmp_path / "a")])
    assert done.exit_code == 0, done.output
    assert json.loads((tmp_path / "a" / "run.json").read_text())["arguments"]["weights"] == {}
    done = runner.invoke(
        app, [*base, "--weights", '{"latency_penalty": 3}', "-o", str(tmp_path / "b")]
    )
    assert done.exit_code == 0, done.output
    arguments = json.loads((tmp_path / "b" / "run.json").read_text())["arguments"]
    assert arguments["weights"] == {"latency_penalty": 3.0}
