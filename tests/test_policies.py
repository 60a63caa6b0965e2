"""The policy registry, what the heuristics and session rules do, and the guarantees of
lookahead and of the bound."""

import pytest
from conftest import call, req, tiny_sim

from evals.serving.runner import run_policy_episode
from kv_cache_env.policies import (
    BUILTIN,
    REFERENCE,
    available,
    bound_pool,
    create,
    decide,
    register,
)
from kv_cache_env.policies.bound import BoundPolicy
from kv_cache_env.policies.lookahead import BASE_HEURISTICS, LookaheadPolicy
from kv_cache_env.sim import BlockType, Quantization, Simulator, get_scenario
from rubrics import DEFAULT_WEIGHTS, score


def test_registry_lists_and_builds_the_required_policies():
    default = {
        "noop",
        "vllm-default",
        "random",
        "fifo",
        "lru",
        "priority",
        "trtllm",
        "compress-first",
        "headroom",
        "int8-everything",
        "swap-paused",
        "discard-paused",
        "swap-paused+compress-all",
        "discard-paused+compress-all",
        "offload-or-discard",
        "bound",
    }
    assert default <= set(BUILTIN)
    assert default | {"lookahead", "compress-all", "evict-all", "swap-all"} <= set(available())
    assert "lookahead" not in BUILTIN  # kept for checks; `bound` is the reference now
    assert REFERENCE == "bound"
    for name in available():
        assert create(name).name == name
    pool = {make().name for make in bound_pool()}
    assert not pool & {"random", "bound", "lookahead"}
    assert {"int8-everything", "swap-paused", "discard-paused", "compress-all"} <= pool


def test_unknown_policy_error_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown policy 'belady'; known policies: noop, "):
        create("belady")
    with pytest.raises(ValueError, match=r"unknown policy 'lur' \(did you mean 'lru'\?\); known"):
        create("lur")


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="already registered"):
        register("lru", lambda: create("lru"))


def test_lookahead_refuses_observation_only_use():
    sim = Simulator(get_scenario("easy"), 0)
    with pytest.raises(TypeError, match="needs the simulator"):
        create("lookahead").act(sim.observe())


def test_observation_policies_only_act_through_valid_actions():
    for name in ("fifo", "lru", "priority", "trtllm", "compress-first", "headroom"):
        record = run_policy_episode(create(name), get_scenario("hard"), 1)
        assert record.invalid_calls == 0, name


def test_priority_never_evicts_system_sequences():
    for seed in range(4):
        record = run_policy_episode(create("priority"), get_scenario("hard"), seed)
        agent_evictions = [e for e in record.evictions if not e.forced]
        assert all(e.block_type is not BlockType.SYSTEM for e in agent_evictions)


def test_compress_first_compresses_before_it_evicts():
    record = run_policy_episode(create("compress-first"), get_scenario("hard"), 2)
    assert record.compress_calls > 0


def test_random_policy_is_reproducible_from_the_episode_seed():
    a = run_policy_episode(create("random"), get_scenario("medium"), 11)
    b = run_policy_episode(create("random"), get_scenario("medium"), 11)
    assert a == b


@pytest.mark.parametrize("scenario", ["easy", "medium", "hard"])
def test_lookahead_is_never_below_the_heuristics_it_considers(scenario):
    sc = get_scenario(scenario)
    for seed in range(3):
        best = max(
            score(run_policy_episode(make(), sc, seed), DEFAULT_WEIGHTS).reward
            for make in BASE_HEURISTICS
        )
        reward = score(run_policy_episode(LookaheadPolicy(), sc, seed), DEFAULT_WEIGHTS).reward
        assert reward >= best - 1e-12, (scenario, seed, reward, best)


def _session_sim(seed: int) -> Simulator:
    return Simulator(get_scenario("hard").with_options(steps=8), seed)


def test_session_rules_act_only_on_what_they_name():
    paused_seen = False
    for seed in range(3):
        sim = _session_sim(seed)
        rules = {n: create(n) for n in ("swap-paused", "discard-paused", "int8-everything")}
        while not sim.done:
            obs = sim.observe()
            entries = {e.seq_id: e for e in obs.entries}
            paused = {e.seq_id for e in obs.entries if e.paused and not e.swapped}
            paused_seen |= bool(paused)
            swaps = rules["swap-paused"].act(obs)
            assert {a.kind for a in swaps} <= {"swap"}
            assert {a.seq_id for a in swaps} <= paused
            assert sum(entries[a.seq_id].private_blocks for a in swaps) <= (
                obs.cpu_capacity - obs.cpu_used
            )
            discards = rules["discard-paused"].act(obs)
            assert [a.kind for a in discards] == ["evict"] * len(paused)
            assert {a.seq_id for a in discards} == paused
            int8 = rules["int8-everything"].act(obs)
            assert all(a.kind == "compress" for a in int8)
            assert all(entries[a.seq_id].quantization is Quantization.FP16 for a in int8)
            for action in discards:
                assert sim.apply(action).ok
            sim.step()
    assert paused_seen


def test_bound_is_never_below_a_policy_of_its_pool():
    names = ("noop", "discard-paused", "swap-paused", "compress-all")
    pool = [lambda n=n: create(n) for n in names]
    sc = get_scenario("hard").with_options(steps=6)
    for seed in range(2):
        best = max(
            score(run_policy_episode(make(), sc, seed), DEFAULT_WEIGHTS).reward for make in pool
        )
        reward = score(run_policy_episode(BoundPolicy(pool), sc, seed), DEFAULT_WEIGHTS).reward
        assert reward >= best - 1e-12, (seed, reward, best)


class _ReplayEverything(BoundPolicy):
    """The bound without reusing last turn's play-outs: every pool replay is played."""

    def _carry(self, taken):  # type: ignore[no-untyped-def]
        super()._carry(taken)
        self._carried = {}


def test_bound_reusing_last_turns_play_outs_takes_the_same_actions():
    names = ("noop", "lru", "discard-paused", "swap-paused", "compress-all")
    pool = [lambda n=n: create(n) for n in names]
    saved = 0
    for name, seed in (("hard", 0), ("agent-tools", 1)):
        sc = get_scenario(name).with_options(steps=6)
        reused, played = BoundPolicy(pool), _ReplayEverything(pool)
        sims = [Simulator(sc, seed), Simulator(sc, seed)]
        reused.reset(seed)
        played.reset(seed)
        while not sims[0].done:
            taken = [p.act_in(s) for p, s in zip((reused, played), sims, strict=True)]
            assert taken[0] == taken[1], (name, seed, sims[0].turn)
            for sim in sims:
                for action in taken[0]:
                    sim.apply(action)
                sim.step()
        assert (
            score(sims[0].record(), DEFAULT_WEIGHTS).reward
            == score(sims[1].record(), DEFAULT_WEIGHTS).reward
        )
        saved += reused.replays_saved
        assert played.replays_saved == 0
    assert saved > 0  # the reuse happened (else this test checks nothing)


def _idle_sessions_world():
    # a and b each run one 4-token call (3 blocks of 4 tokens) and pause for 30 steps, a first
    # (last read at t3, b at t4); r then grows by a block a step from t4; capacity 10
    requests = [
        req("a", prompt=8, output=4, rate=4, followups=(call(30),)),
        req("b", arrival=1, prompt=8, output=4, rate=4, followups=(call(30),)),
        req("r", arrival=2, prompt=8, output=24, rate=4),
    ]
    return tiny_sim(requests, capacity=10, steps=10)


def _play(sim, name):
    policy = create(name)
    while not sim.done:
        for action in decide(policy, sim):
            assert sim.apply(action).ok
        sim.step()
        sim.check_invariants()
    return sim.record()


def test_vllm_default_reclaims_idle_paused_kv_lru_before_any_running_preemption():
    # vLLM v1: a finished call's blocks stay cached and the free queue gives the least recently
    # freed first; a running request is preempted only when nothing cached is left
    kept = _play(_idle_sessions_world(), "noop")
    assert kept.forced_preemptions[6] == 1  # noop: r's growth at t6 preempts r itself
    reclaimed = _play(_idle_sessions_world(), "vllm-default")
    assert sum(reclaimed.forced_preemptions) == 0 and reclaimed.total_failures == 0
    # a (paused first) goes on the first turn r's next block does not fit, b when it is needed
    assert [(e.turn, e.seq_id, e.paused, e.forced) for e in reclaimed.evictions] == [
        (6, "a", True, False),
        (9, "b", True, False),
    ]
    assert reclaimed.evictions[0].freed_blocks == 3


def test_vllm_default_never_touches_running_sequences():
    sim = Simulator(get_scenario("chat-human"), 3)
    policy = create("vllm-default")
    while not sim.done:
        obs = sim.observe()
        running = {e.seq_id for e in obs.entries if not e.paused}
        actions = decide(policy, sim)
        assert all(a.kind == "evict" and a.seq_id not in running for a in actions)
        for action in actions:
            sim.apply(action)
        sim.step()
