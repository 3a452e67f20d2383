"""The executor's cordon rules (`reassigner.edge.cordons`, WHOSE): ours recorded and removed,
others' kept or restored, idempotent; and a property: cordon then uncordon, with nobody else
touching the config, leaves it as it was."""

from __future__ import annotations

from hypothesis import given, strategies as st

from reassigner.edge.cordons import CordonChange, compute_cordon, compute_uncordon


def test_an_uncordoned_broker_is_cordoned_whole_and_the_record_says_nothing_was_there():
    change = compute_cordon((), None, None)
    assert change == CordonChange(write=True, value="*", record={"value": "*", "previous": None})
    assert compute_uncordon("*", change.record) == CordonChange(write=True, value=None, forget=True)


def test_someone_elses_whole_broker_cordon_is_left_and_never_removed_by_us():
    change = compute_cordon((), "*", None)
    assert not change.write and change.record is None and "someone else" in change.kept
    assert not compute_uncordon("*", None).write  # no record: not ours


def test_someone_elses_dir_cordon_is_widened_to_the_broker_and_restored_after():
    change = compute_cordon((), "/data/0", None)
    assert change.write and change.value == "*" and change.record == {"value": "*", "previous": "/data/0"}
    assert compute_uncordon("*", change.record) == CordonChange(write=True, value="/data/0", forget=True)


def test_dirs_are_appended_to_others_and_a_covered_request_changes_nothing():
    change = compute_cordon(("/data/1",), "/data/0", None)
    assert change.value == "/data/0,/data/1" and change.record["previous"] == "/data/0"
    assert compute_cordon(("/data/0",), "/data/0, /data/1", None).write is False


def test_ours_asked_again_changes_nothing():
    mine = {"value": "*", "previous": "/data/0"}
    assert compute_cordon((), "*", mine) == CordonChange()


def test_a_cordon_someone_changed_since_is_theirs_and_only_our_record_goes():
    change = compute_uncordon("/data/3", {"value": "*", "previous": None})
    assert not change.write and change.forget and "changed by someone" in change.kept


DIRS = st.lists(st.sampled_from(["/d0", "/d1", "/d2"]), max_size=3, unique=True)


@given(before=st.one_of(st.none(), st.just("*"), DIRS.map(lambda d: ",".join(d) or None)), wanted=DIRS)
def test_cordon_then_uncordon_gives_back_what_was_there(before, wanted):
    cordoned = compute_cordon(tuple(wanted), before, None)
    now = cordoned.value if cordoned.write else before
    after = compute_uncordon(now, cordoned.record)
    assert (after.value if after.write else now) == before
    if cordoned.write:  # in force while cordoned: what was asked is covered
        assert now == "*" or set(wanted) <= set(now.split(","))
