"""The host transfer link: a per-step block budget shared by offloads and loads, first come
first served (`Scheduler._transfer`), on tiny worlds (4-token blocks, capacity 20, a link of one
block a step) and under random actions on the suite's scenarios."""

from conftest import call, req, steps, tiny_sim
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kv_cache_env.sim import Simulator, Status, compress, evict, get_scenario, make_action, swap
from kv_cache_env.sim.text import parse, render

ONE_BLOCK = 0.05  # x capacity 20 = one block a step


def _session_world(link: float = ONE_BLOCK, **changes):
    # s: an 8-token prompt and 4 outputs (3 blocks at t3), then a 2-step tool pause: back at t6
    requests = [req("s", prompt=8, output=4, rate=4, followups=(call(2),))]
    sim = tiny_sim(requests, capacity=20, link_fraction_per_s=link, **changes)
    steps(sim, 4)  # paused since t4, its 3 blocks on the GPU
    return sim, sim.engine.sequences["s"]


def test_an_offload_keeps_its_gpu_blocks_until_the_link_has_moved_them():
    sim, s = _session_world()
    assert sim.engine.host.blocks_per_step == 1
    result = sim.apply(swap("s"))
    assert result.ok and result.freed_blocks == 0 and "queued on the host link" in result.message
    assert (
        s.status is Status.SWAPPED
        and sim.engine.kv.pool.used == 3
        and sim.engine.host.cpu_used == 3
    )
    entry = sim.observe().entry("s")
    assert entry.swapped and entry.moving == 3 and entry.gpu_cost == 3
    used = []
    for _ in range(2):  # t4, t5: one block a step leaves the GPU
        assert sim.step().transferred == 1
        sim.check_invariants()
        used.append(sim.engine.kv.pool.used)
    assert used == [2, 1]
    assert sim.observe().backlog == 1


def test_a_load_waits_for_the_link_before_the_call_computes():
    # no limit: back at t6, admitted with its KV loaded, first token at t7
    free, _ = _session_world(link=0.0)
    free.apply(swap("s"))
    tokens = [free.step().tokens for _ in range(4)]  # t4..t7
    assert tokens == [0, 0, 0, 1]
    # one block a step: the offload moves at t4-t6, the load (queued at t6's admission) at
    # t7-t9; the call computes once the last block is in: first token at t9
    sim, s = _session_world()
    sim.apply(swap("s"))
    tokens = []
    for _ in range(6):  # t4..t9
        tokens.append(sim.step().tokens)
        sim.check_invariants()
        if sim.engine.t == 8:
            entry = sim.observe().entry("s")
            assert s.status is Status.RUNNING and s.inbound == 2 and entry.moving == 2
            assert not sim.apply(compress("s")).ok and not sim.apply(swap("s")).ok
    assert tokens == [0, 0, 0, 0, 0, 1]
    assert s.cpu_blocks == 0 and sim.engine.host.cpu_used == 0 and not sim.engine.host.queue


def test_a_slow_load_misses_the_resumed_calls_first_token_slo():
    # a 1-step SLO: back at t6, first token due by t7; the load ends at t9
    sim, s = _session_world(max_wait_steps=1)
    sim.apply(swap("s"))
    failures = [sim.step().failures for _ in range(4)]  # t4..t7
    failures.append(sim.step().failures)  # t8: the deadline has passed
    assert failures == [0, 0, 0, 0, 1]
    assert s.status is Status.FAILED and s.gpu_blocks == s.cpu_blocks == 0
    assert (
        not sim.engine.host.queue and sim.engine.kv.pool.used == 0 and sim.engine.host.cpu_used == 0
    )
    sim.check_invariants()


def test_evicting_an_offload_in_flight_frees_what_is_left_and_leaves_the_link():
    sim, s = _session_world()
    sim.apply(swap("s"))
    steps(sim, 1)  # one block moved
    result = sim.apply(evict("s"))
    assert result.ok and result.freed_blocks == 2
    assert s.status is Status.DISCARDED and not sim.engine.host.queue
    assert sim.engine.kv.pool.used == 0 and sim.engine.host.cpu_used == 0
    sim.check_invariants()


def test_loads_and_offloads_share_the_link_first_come_first_served():
    # a and b pause together; a is offloaded first, then b: b's blocks move after a's
    requests = [
        req("a", prompt=8, output=4, rate=4, followups=(call(9),)),
        req("b", prompt=8, output=4, rate=4, followups=(call(9),)),
    ]
    sim = tiny_sim(requests, capacity=20, link_fraction_per_s=2 / 20)  # two blocks a step
    steps(sim, 4)
    sim.apply(swap("a"))
    sim.apply(swap("b"))
    a, b = sim.engine.sequences["a"], sim.engine.sequences["b"]
    moving = []
    for _ in range(3):
        sim.step()
        moving.append((a.outbound, b.outbound))
    assert moving == [(1, 3), (0, 2), (0, 0)]


def test_the_link_shows_in_the_text_and_parses_back():
    sim, _ = _session_world()
    sim.apply(swap("s"))
    obs = sim.observe()
    text = render(obs)
    assert "link 1/step backlog 3" in text
    assert parse(text) == obs
    assert "link none" in render(_session_world(link=0.0)[0].observe())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario=st.sampled_from(("hard", "agent-tools", "chat-human")),
    link=st.sampled_from((0.01, 0.05, 0.3)),
    seed=st.integers(0, 10_000),
    data=st.data(),
)
def test_the_link_never_moves_more_than_its_budget_under_random_actions(scenario, link, seed, data):
    sc = get_scenario(scenario).with_options(link_fraction_per_s=link, warmup_steps=2)
    sim = Simulator(sc, seed)
    budget = sim.engine.host.blocks_per_step
    assert budget >= 1
    while not sim.done:
        ids = [e.seq_id for e in sim.observe().entries]
        for _ in range(data.draw(st.integers(0, 5))):
            if not ids:
                break
            kind = data.draw(st.sampled_from(("evict", "compress", "swap", "swap")))
            action = make_action(kind, data.draw(st.sampled_from(ids)))
            assert not isinstance(action, str)
            before = sim.engine.kv.pool.available
            result = sim.apply(action)
            assert sim.engine.kv.pool.available - before == result.freed_blocks
        stats = sim.step()
        assert 0 <= stats.transferred <= budget
        sim.check_invariants()
    record = sim.record()
    assert not record.drain_capped and sim.engine.idle and not sim.engine.host.queue
    assert sim.engine.host.cpu_used == 0 and sim.engine.kv.pool.used == 0
