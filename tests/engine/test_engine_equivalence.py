"""Continuous batching must not change what any stream decodes: N streams batched together (different lists,
some with none, joining and leaving at different steps, one switching its list) produce exactly what each
produces alone. Random tiny models: we compare outputs, not accuracy."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np
import pytest

from backend.engine import Engine, StepResult, StreamOptions, VocabularyHandle
from tests.engine.conftest import chunks, noise

TERMS_A = ["recaca", "cahe", "linezolid"]
TERMS_B = ["reum he", "husqvarna", "quarterly revenue"]


@dataclass
class Plan:
    """One stream of the scenario: its audio, options, when it joins, and an optional list switch."""

    seed: int
    seconds: float
    chunk_s: float
    vocabulary: str | None
    join_after_steps: int
    switch_to: str | None = None  # a list name, NO_LIST to drop the list, None: no switch
    switch_at_chunk: int = 2
    decoding: str = "greedy"


NO_LIST = "-"


def outputs(results: list[StepResult]) -> list[tuple[str, tuple[str, ...]]]:
    return [(r.partial, tuple(f"{f.text}|{f.start_s:.2f}|{f.end_s:.2f}" for f in r.finals)) for r in results]


async def run_stream(engine: Engine, plan: Plan, handles: dict[str, VocabularyHandle]) -> list[StepResult]:
    vocabulary = handles.get(plan.vocabulary or "")
    options = StreamOptions(chunk_s=plan.chunk_s, decoding=plan.decoding, vocabulary=vocabulary)  # type: ignore[arg-type]
    stream = engine.open_stream(options)
    results = []
    for index, chunk in enumerate(chunks(noise(plan.seed, plan.seconds), engine.chunk_samples(plan.chunk_s))):
        if plan.switch_to is not None and index == plan.switch_at_chunk:
            await stream.set_vocabulary(handles.get(plan.switch_to))
        results.append(await stream.push(chunk))
    results.append(await stream.finish())
    return results


async def wait_for_steps(engine: Engine, steps: int) -> None:
    while engine.stats().steps_total < steps:
        await asyncio.sleep(0.002)


async def run_batched(engine: Engine, plans: list[Plan], handles: dict[str, VocabularyHandle]) -> list:
    base = engine.stats().steps_total

    async def delayed(plan: Plan) -> list[StepResult]:
        await wait_for_steps(engine, base + plan.join_after_steps)
        return await run_stream(engine, plan, handles)

    return await asyncio.gather(*(delayed(plan) for plan in plans))


PLANS = [
    Plan(seed=1, seconds=4.48, chunk_s=0.56, vocabulary="a", join_after_steps=0),
    Plan(seed=2, seconds=2.24, chunk_s=0.56, vocabulary="b", join_after_steps=0),
    Plan(seed=3, seconds=3.36, chunk_s=0.56, vocabulary=None, join_after_steps=2),
    Plan(seed=4, seconds=4.48, chunk_s=1.12, vocabulary="a", join_after_steps=1),
    Plan(seed=5, seconds=3.36, chunk_s=1.12, vocabulary=None, join_after_steps=3),
    Plan(seed=6, seconds=3.92, chunk_s=0.56, vocabulary=None, join_after_steps=1, switch_to="b"),
    Plan(
        seed=7,
        seconds=3.92,
        chunk_s=0.56,
        vocabulary="a",
        join_after_steps=0,
        switch_to=NO_LIST,
        switch_at_chunk=3,
    ),
    Plan(seed=1, seconds=4.48, chunk_s=0.56, vocabulary=None, join_after_steps=4),
]


def with_decoding(plans: list[Plan], decoding: str) -> list[Plan]:
    return [Plan(**{**plan.__dict__, "decoding": decoding}) for plan in plans]


@pytest.mark.parametrize("decodings", [("greedy",), ("beam",), ("greedy", "beam")])
async def test_batched_equals_alone(engine: Engine, decodings: tuple[str, ...]) -> None:
    """Greedy, beam, and both kinds in one scenario (a step then holds up to four pipeline groups)."""
    plans = [p for decoding in decodings for p in with_decoding(PLANS, decoding)]
    if len(decodings) > 1:
        plans = plans[::2]
    handles = {"a": await engine.load_vocabulary(TERMS_A), "b": await engine.load_vocabulary(TERMS_B)}
    batched = await run_batched(engine, plans, handles)
    alone = [await run_stream(engine, plan, handles) for plan in plans]
    for plan, got, want in zip(plans, batched, alone, strict=True):
        assert outputs(got) == outputs(want), plan
    assert engine.stats().max_batch_streams_seen >= 3  # the scenario really batched streams together


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
async def test_biasing_is_active_and_isolated(engine: Engine, decoding: str) -> None:
    """A list changes its own stream's text; a stream without a list decodes as if no list existed."""
    plain = Plan(seed=11, seconds=4.48, chunk_s=0.56, vocabulary=None, join_after_steps=0, decoding=decoding)
    biased = Plan(seed=11, seconds=4.48, chunk_s=0.56, vocabulary="a", join_after_steps=0, decoding=decoding)
    before = await run_stream(engine, plain, {})
    handles = {"a": await engine.load_vocabulary(TERMS_A), "b": await engine.load_vocabulary(TERMS_B)}
    others = [
        Plan(seed=20 + i, seconds=4.48, chunk_s=0.56, vocabulary="ab"[i % 2], join_after_steps=0)
        for i in range(4)
    ]
    together = await run_batched(engine, [plain, *others], handles)
    assert outputs(together[0]) == outputs(before)
    with_list = await run_stream(engine, biased, handles)
    assert outputs(with_list) != outputs(before)
    assert np.isfinite(engine.stats().last_step_ms)
