"""The session's order (tests/ordering.py): pure modules first, modules never split, each shared
service's last user named."""

from __future__ import annotations

from hypothesis import given, strategies as st

from tests.ordering import CollectedTest, compute_group, compute_last_users, compute_order


def test(module: str, *fixtures: str, own_stack: bool = False) -> CollectedTest:
    return CollectedTest(module=module, fixtures=frozenset(fixtures), own_stack=own_stack)


test.__test__ = False  # a helper, not a test


def test_modules_run_pure_first_then_by_the_services_they_start():
    collected = [
        test("a_pipeline.py", "local_stack", "spark", "redis_url"),
        test("b_spark.py", "spark"),
        test("c_pure.py"),
        test("d_executor.py", "redis_url", own_stack=True),
        test("e_operator.py", "local_stack"),
        test("f_store.py", "redis_url"),
        test("g_pure.py", "tmp_path"),
    ]
    order = [collected[i].module for i in compute_order(collected)]
    assert order == ["c_pure.py", "g_pure.py", "f_store.py", "d_executor.py", "e_operator.py",
                     "a_pipeline.py", "b_spark.py"]


def test_a_module_takes_the_group_of_its_heaviest_test_and_is_never_split():
    collected = [test("ops.py"), test("other.py"), test("ops.py", "local_stack"), test("ops.py")]
    assert compute_group(t for t in collected if t.module == "ops.py") == 3
    assert compute_order(collected) == [1, 0, 2, 3]


def test_each_service_stops_after_its_last_user_and_an_unused_one_is_not_named():
    collected = [test("a.py", "redis_url"), test("b.py", "local_stack", "redis_url"), test("c.py")]
    assert compute_last_users(collected, ["a", "b", "c"]) == {"redis_url": "b", "local_stack": "b"}


modules = st.sampled_from(["m0", "m1", "m2", "m3", "m4"])
fixture_sets = st.sets(st.sampled_from(["local_stack", "spark", "redis_url", "tmp_path"]))
collected_tests = st.lists(st.builds(CollectedTest, module=modules, fixtures=fixture_sets.map(frozenset),
                                     own_stack=st.booleans()), max_size=30)


@given(collected_tests)
def test_the_order_is_a_permutation_that_keeps_modules_whole_and_groups_rising(collected):
    order = compute_order(collected)
    assert sorted(order) == list(range(len(collected)))
    seen: list[str] = []
    for index in order:
        module = collected[index].module
        if not seen or seen[-1] != module:
            assert module not in seen, "a module was split"
            seen.append(module)
    groups = [compute_group(t for t in collected if t.module == module) for module in seen]
    assert groups == sorted(groups)
    for module in seen:  # a module's own tests keep their order
        indexes = [i for i in order if collected[i].module == module]
        assert indexes == sorted(indexes)
