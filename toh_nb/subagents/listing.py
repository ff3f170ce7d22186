"""Listing children (``list_agents``, ``hub.list_agents()``): pure functions over store headers and descriptors.

A listing never touches live activations beyond asking whether a child is resident, so it reads the
same after a restart as before it; only continuable children are listed (a one-shot child cannot be
messaged), and a log the store cannot read becomes a diagnostic row instead of an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..core.errors import StoreError
from ..store.base import full_store
from ..core.session import SessionHeader
from ..core.states import AgentStatus
from . import descriptor as descriptors
from . import texts


@dataclass(slots=True)
class ListEntry:
    """One ``list_agents`` row: a child or a diagnostic. ``str()`` is the exact tool line."""

    kind: str  # child | diagnostic
    id: str
    label: str | None = None
    status: str | None = None  # running | idle | ready
    reason: str | None = None  # diagnostic reason
    parent: str | None = None
    depth: int | None = None
    descendants_form: bool = False

    def __str__(self) -> str:
        if self.kind == "diagnostic":
            if self.descendants_form:
                return texts.diagnostic_line(self.id, self.reason, self.parent, self.depth)
            return texts.diagnostic_line(self.id, self.reason)
        if self.descendants_form:
            return texts.list_line_descendant(self.id, self.status, self.parent, self.depth, self.label or "")
        return texts.list_line(self.id, self.status, self.label or "")


class AgentList(list):
    """The entries of a listing; ``str()`` is exactly the ``list_agents`` tool text."""

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self) if self else texts.NO_SUBAGENTS


def status_of(agents: dict, child_id: str) -> AgentStatus:
    """``running`` / ``idle`` for a resident child (``agents``: the runtime's registry), else ``ready``."""
    agent = agents.get(child_id)
    if agent is None:
        return AgentStatus.READY
    return AgentStatus.RUNNING if agent.status == "running" else AgentStatus.IDLE


#: why a settled child could not resume (its provider's answer), or None: ``(provider name, child id)``
ResumeProblem = Callable[[str, str], "str | None"]


def entry(store: Any, status: Callable[[str], str], header: SessionHeader, descendants: bool,
          depth: int, resume_problem: ResumeProblem | None = None) -> ListEntry | None:
    """The row of one child header: a continuable child, a diagnostic, or ``None`` (not listed)."""
    # a store that can list a large unindexed store without parsing every transcript does
    problem = store.listing_diagnostic(header.id)
    if problem == "corrupt":
        return ListEntry("diagnostic", header.id, reason=corrupt_reason(store, header.id),
                         parent=header.parent_session, depth=depth, descendants_form=descendants)
    try:
        # a store that can answer without loading the transcript does (a 10,000-child listing)
        descriptor = store.descriptor(header.id)
        record = descriptors.parse(descriptor)
    except descriptors.DescriptorError as error:  # read, and of the wrong shape: say what is wrong
        return ListEntry("diagnostic", header.id, reason=f"{CORRUPT}: descriptor: {error}",
                         parent=header.parent_session, depth=depth, descendants_form=descendants)
    except (KeyError, StoreError, OSError, ValueError):
        if store.listing_diagnostic(header.id) == "corrupt":  # found while reading
            return ListEntry("diagnostic", header.id, reason=corrupt_reason(store, header.id),
                             parent=header.parent_session, depth=depth, descendants_form=descendants)
        return ListEntry("diagnostic", header.id, reason="unavailable", parent=header.parent_session,
                         depth=depth, descendants_form=descendants)
    if record is None:
        # no descriptor: a clean prefix of a one-shot child's log (an older version wrote it in
        # the first turn), never a continuable one (written with its header): not listed
        return None
    if record["mode"] != "continuable":
        return None
    child_status = status(header.id)
    if child_status == "ready" and resume_problem is not None:
        reason = resume_problem(record["provider"], header.id)
        if reason is not None:  # a send would be refused: say why here, not only then
            return ListEntry("diagnostic", header.id, reason=reason, parent=header.parent_session, depth=depth,
                             descendants_form=descendants)
    return ListEntry("child", header.id, label=record.get("label"), status=child_status,
                     parent=header.parent_session, depth=depth, descendants_form=descendants)


CORRUPT = "corrupt"


def corrupt_reason(store: Any, child_id: str) -> str:
    """``corrupt: <what>`` (the store's problem: which line, which field), or ``corrupt`` from a store
    that cannot say."""
    problem = store.problem(child_id)
    return f"{CORRUPT}: {problem}" if problem else CORRUPT


def unreadable_rows(store: Any, parent_id: str, descendants: bool, depth: int) -> list[ListEntry]:
    """Rows for the logs under ``parent_id`` whose header cannot be read (a store that can tell: see
    ``JsonlStore.corrupt_children_of``): listed as diagnostics, never dropped."""
    rows = []
    for child_id in store.corrupt_children_of(parent_id):
        reason = corrupt_reason(store, child_id) if store.diagnostic(child_id) == CORRUPT else "unavailable"
        rows.append(ListEntry("diagnostic", child_id, reason=reason, parent=parent_id, depth=depth,
                              descendants_form=descendants))
    return rows


def children_headers(store: Any, parent_id: str) -> list[SessionHeader]:
    """The subagent children of ``parent_id`` in creation order (ties by id)."""
    headers = [h for h in store.children_of(parent_id) if h.origin == "subagent"]
    headers.sort(key=lambda h: (h.created, h.id))
    return headers


def list_children(store: Any, status: Callable[[str], str], parent_id: str,
                  resume_problem: ResumeProblem | None = None) -> AgentList:
    """The direct continuable children of ``parent_id`` (``store``: any :class:`SessionStore`; the
    optional abilities it lacks get their defaults, ``toh_nb.store.base.StoreBase``)."""
    store = full_store(store)
    out = AgentList()
    for header in children_headers(store, parent_id):
        row = entry(store, status, header, False, 1, resume_problem)
        if row is not None:
            out.append(row)
    out.extend(unreadable_rows(store, parent_id, False, 1))
    return out


def list_descendants(store: Any, status: Callable[[str], str], root_id: str,
                     resume_problem: ResumeProblem | None = None) -> AgentList:
    """Every continuable descendant of ``root_id``, depth first in creation order (the unreadable logs
    under each parent after its readable children's subtrees)."""
    store = full_store(store)
    out = AgentList()
    # entries: a header to list (and descend into), or a parent id whose unreadable logs come next
    stack: list[tuple[Any, int]] = [(root_id, 1)]
    stack.extend((h, 1) for h in reversed(children_headers(store, root_id)))
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            out.extend(unreadable_rows(store, item, True, depth))
            continue
        row = entry(store, status, item, True, depth, resume_problem)
        if row is not None:
            out.append(row)
        stack.append((item.id, depth + 1))
        for child in reversed(children_headers(store, item.id)):
            stack.append((child, depth + 1))
    return out
