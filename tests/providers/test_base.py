"""``toh_nb.providers.base``: a provider's optional abilities are typed protocols, resolved once."""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.providers.base import (Abilities, Attachable, Capabilities, ChildPlan, Closable, ExplainsResume,
                                   PlansNow, ResumesNow, abilities_of)
from toh_nb.providers.local import ForkProvider, SpawnProvider


class Minimal:
    name = "minimal"
    capabilities = Capabilities(continuable=False)

    async def plan(self, child):
        return ChildPlan()


class Counting(Minimal):
    name = "counting"

    def __init__(self):
        self.attached = 0
        self.closed = 0
        self.asked = []

    def attach(self):
        self.attached += 1

    async def aclose(self):
        self.closed += 1

    def resume_problem(self, child_id, store):
        self.asked.append(child_id)
        return "cannot resume: counted"


def test_a_provider_declares_only_plan_and_has_no_optional_ability():
    assert abilities_of(Minimal()) == Abilities()
    assert not isinstance(Minimal(), (PlansNow, ResumesNow, ExplainsResume, Attachable, Closable))


def test_the_in_process_providers_plan_and_resume_synchronously():
    for provider in (SpawnProvider(), ForkProvider()):
        abilities = abilities_of(provider)
        assert abilities.plan_now == provider.plan_now and abilities.resume_now == provider.resume_now
        assert (abilities.resume_problem, abilities.attach, abilities.aclose) == (None, None, None)


def test_registration_resolves_the_abilities_once_and_the_hub_uses_them():
    provider = Counting()
    abilities = abilities_of(provider)
    assert (abilities.attach, abilities.aclose, abilities.resume_problem) == (
        provider.attach, provider.aclose, provider.resume_problem)

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), ids="sequential", providers={"counting": provider}):
            assert (provider.attached, provider.closed) == (1, 0)

    asyncio.run(main())
    assert (provider.attached, provider.closed) == (1, 1)
