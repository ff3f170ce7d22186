"""Listing is pure: rows come from store headers and descriptors alone (no runtime, no live agents)."""

from __future__ import annotations

from toh_nb.core.errors import StoreError
from toh_nb.core.session import SessionHeader
from toh_nb.subagents import descriptor
from toh_nb.subagents.listing import list_children, list_descendants, status_of


class Headers:
    """The three questions a listing asks a store: children, a diagnostic, a descriptor."""

    def __init__(self):
        self.headers: list[SessionHeader] = []
        self.descriptors: dict[str, object] = {}
        self.corrupt: set[str] = set()

    def add(self, child_id, parent, created, record, origin="subagent"):
        self.headers.append(SessionHeader(child_id, created, parent_session=parent, origin=origin))
        self.descriptors[child_id] = record

    def children_of(self, parent_id):
        return [h for h in self.headers if h.parent_session == parent_id]

    def diagnostic(self, child_id):
        return "corrupt" if child_id in self.corrupt else None

    def descriptor(self, child_id):
        record = self.descriptors[child_id]
        if isinstance(record, Exception):
            raise record
        return record


def store():
    s = Headers()
    s.add("a2", "root", 2.0, descriptor.continuable("spawn", "second"))
    s.add("a1", "root", 1.0, descriptor.continuable("spawn", "first"))
    s.add("a3", "root", 3.0, descriptor.one_shot("spawn", "once"))  # a one-shot child is never listed
    s.add("a4", "root", 4.0, StoreError("gone"))
    s.add("a5", "root", 5.0, descriptor.continuable("spawn", "bad"))
    s.corrupt.add("a5")
    s.add("a6", "a1", 6.0, descriptor.continuable("fork", "grandchild"))
    s.add("r9", "root", 0.5, None, origin="root")  # not a subagent
    return s


def test_children_in_creation_order_with_diagnostics():
    status = {"a1": "idle"}.get
    text = str(list_children(store(), lambda cid: status(cid) or "ready", "root"))
    assert text == ("a1 [idle] \u2014 first\n"
                    "a2 [ready] \u2014 second\n"
                    "a4 [diagnostic: unavailable]\n"
                    "a5 [diagnostic: corrupt]")


def test_descendants_depth_first_with_parent_and_depth():
    rows = list_descendants(store(), lambda cid: "ready", "root")
    assert [(r.id, r.parent, r.depth) for r in rows] == [
        ("a1", "root", 1), ("a6", "a1", 2), ("a2", "root", 1), ("a4", "root", 1), ("a5", "root", 1)]
    assert str(rows[1]) == "a6 [ready] parent=a1 depth=2 \u2014 grandchild"


def test_no_children_and_resident_status():
    assert str(list_children(store(), lambda cid: "ready", "nobody")) == "(no subagents)"

    class Busy:
        status = "running"

    class Idle:
        status = "idle"

    agents = {"a1": Busy(), "a2": Idle()}
    assert [status_of(agents, c) for c in ("a1", "a2", "a3")] == ["running", "idle", "ready"]
