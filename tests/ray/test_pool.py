"""The pool's local start: Ray's cluster processes die with the *thread* that started them, so a
provider starting a local cluster from the event loop's executor (or the notebook's portal thread)
must start it from a thread that lasts as long as the process."""

from __future__ import annotations

import threading

from toh_nb.providers.ray.pool import in_lasting_thread


def test_ray_is_started_from_one_daemon_thread_that_outlives_the_caller():
    seen = []

    def record():
        seen.append(threading.current_thread())
        return len(seen)

    callers = [threading.Thread(target=in_lasting_thread, args=(record,)) for _ in range(2)]
    for caller in callers:
        caller.start()
        caller.join()
    assert in_lasting_thread(record) == 3
    assert len(set(seen)) == 1 and seen[0] not in callers and seen[0] is not threading.main_thread()
    assert seen[0].daemon and seen[0].is_alive() and seen[0].name == "toh_nb-ray-starter"


def test_the_starter_thread_hands_back_the_callers_exception():
    def fail():
        raise RuntimeError("ray.init refused")

    try:
        in_lasting_thread(fail)
    except RuntimeError as error:
        assert str(error) == "ray.init refused"
    else:
        raise AssertionError("the error was swallowed")


def test_without_ray_the_provider_says_how_to_install_it(monkeypatch):
    import sys

    import pytest

    import toh_nb as tn

    monkeypatch.setitem(sys.modules, "ray", None)  # an import of ray now fails as if it were missing
    with pytest.raises(tn.UsageError) as info:
        tn.RayProvider()
    assert str(info.value) == "the ray provider needs Ray: pip install 'toh-nb[ray]' (plain `ray`)"


def test_spread_puts_each_new_host_on_the_node_with_the_fewest():
    from toh_nb.providers.ray.pool import HostPool, HostRecord

    a, b, c = ("a" * 56), ("b" * 56), ("c" * 56)  # node ids: 28 bytes in hex

    d = "d" * 56

    class Cluster:
        @staticmethod
        def nodes():
            return [{"NodeID": b, "Alive": True, "Resources": {"CPU": 2.0, "gpu_box": 1.0}},
                    {"NodeID": a, "Alive": True, "Resources": {"CPU": 1.0, "gpu_box": 1.0}},
                    {"NodeID": c, "Alive": False, "Resources": {"CPU": 8.0, "gpu_box": 1.0}},
                    {"NodeID": d, "Alive": True, "Resources": {"CPU": 8.0}}]

    pool = HostPool(size=4, address=None, init_options={}, actor_options={"resources": {"gpu_box": 1}}, spread=True)
    pool.hosts = [HostRecord("h1", None, node_id=a)]
    nodes = pool.spread_over(Cluster)
    assert nodes == {a: 1, b: 0}  # a dead node gets none, nor one without the resources a host reserves
    chosen = [pool.next_node(Cluster, nodes) for _ in range(3)]
    assert [strategy.node_id for strategy in chosen] == [b, a, b]
    # hard: the node can hold it (with a soft affinity Ray at times put a host beside the previous one)
    assert not any(strategy.soft for strategy in chosen)
    greedy = HostPool(size=4, address=None, init_options={}, actor_options={"num_cpus": 2}, spread=True)
    assert greedy.spread_over(Cluster) == {b: 0, d: 0}  # 2 CPUs a host: not the 1-CPU node
