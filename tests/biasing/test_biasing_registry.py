"""The vocabulary registry: keys, disk and memory caches, reference-counted decoder registration."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from nemo.collections.asr.parts.context_biasing.biasing_multi_model import GPUBiasingMultiModel

from biasing.disk_cache import DiskCache
from biasing.graph import GraphMode, GraphParams
from biasing.nemo.registry import BiasingRegistry, LeaseReleasedError
from biasing.terms import Term, TermValidationError

TERMS = ["Linezolid", "acme group", Term("Husqvarna", 2.0)]


def names(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 10)))
        for _ in range(count)
    ]


@pytest.fixture
def multi_model(bpe) -> GPUBiasingMultiModel:
    return GPUBiasingMultiModel(vocab_size=bpe.get_piece_size(), use_triton=False)


def test_same_terms_same_key_any_change_another(bpe, char_sp) -> None:
    registry = BiasingRegistry(bpe)
    key = registry.key_for(TERMS)
    assert registry.key_for([TERMS[2], Term("acme group"), "Linezolid", "Linezolid"]) == key
    assert BiasingRegistry(bpe).key_for(TERMS) == key
    changed = [
        registry.key_for(["Linezolid", "acme groups", Term("Husqvarna", 2.0)]),
        registry.key_for(["Linezolid", "acme group", Term("Husqvarna", 2.5)]),
        registry.key_for(["Linezolid", "acme group", Term("Husqvarna", 2.0, ("Husky",))]),
        BiasingRegistry(bpe, GraphParams(tau=1.0)).key_for(TERMS),
        BiasingRegistry(bpe, GraphParams(mode=GraphMode.CASE_SENSITIVE_TREE)).key_for(TERMS),
        BiasingRegistry(char_sp).key_for(TERMS),
    ]
    assert len({key, *changed}) == len(changed) + 1


def test_disk_round_trip_gives_identical_arrays(bpe, tmp_path: Path) -> None:
    first = BiasingRegistry(bpe, cache_dir=tmp_path).compile(TERMS)
    again = BiasingRegistry(bpe, cache_dir=tmp_path)
    loaded = again.compile(TERMS)
    assert again.stats().compiles == 0 and again.stats().disk_hits == 1
    for name, array in first.graph.arrays().items():
        np.testing.assert_array_equal(loaded.graph.arrays()[name], array)
        assert loaded.graph.arrays()[name].dtype == array.dtype


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip", "empty"])
def test_corrupt_file_is_recompiled(bpe, tmp_path: Path, damage: str) -> None:
    key = BiasingRegistry(bpe, cache_dir=tmp_path).compile(TERMS).key
    path = tmp_path / f"{key}.npz"
    data = path.read_bytes()
    damaged = {
        "truncate": data[: len(data) // 2],
        "garbage": os.urandom(len(data)),
        "flip": data[: len(data) // 2] + bytes(b ^ 0xFF for b in data[len(data) // 2 : len(data) // 2 + 10])
        + data[len(data) // 2 + 10 :],
        "empty": b"",
    }[damage]
    path.write_bytes(damaged)
    registry = BiasingRegistry(bpe, cache_dir=tmp_path)
    compiled = registry.compile(TERMS)
    assert registry.stats().compiles == 1
    compiled.graph.validate()
    assert DiskCache(tmp_path, 2**30).load(key) is not None


def test_concurrent_writers_do_not_corrupt(bpe, tmp_path: Path) -> None:
    lists = [TERMS, ["metformin", "zolpidem"]]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            BiasingRegistry(bpe, cache_dir=tmp_path).compile(lists[index % 2])
        except BaseException as error:  # collected and re-raised by the test thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")) == []
    cache = DiskCache(tmp_path, 2**30)
    for terms in lists:
        assert cache.load(BiasingRegistry(bpe).key_for(terms)) is not None


def test_concurrent_compiles_of_one_key_share_one_compile(bpe) -> None:
    registry = BiasingRegistry(bpe)
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(registry.compile(names(300, 1)))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert registry.stats().compiles == 1 and len({id(r) for r in results}) == 1


def test_memory_budget_evicts_least_recently_used(bpe) -> None:
    size = BiasingRegistry(bpe).compile(names(50, 0)).nbytes
    registry = BiasingRegistry(bpe, memory_budget_bytes=int(size * 2.5))
    a, b = registry.compile(names(50, 0)), registry.compile(names(50, 1))
    registry.compile(names(50, 0))  # a is now the most recently used
    registry.compile(names(50, 2))
    assert registry.cached(a.key) is not None and registry.cached(b.key) is None
    assert registry.stats().memory_bytes <= registry.memory_budget_bytes


def test_disk_budget_evicts_least_recently_used(bpe, tmp_path: Path) -> None:
    probe = BiasingRegistry(bpe, cache_dir=tmp_path / "probe").compile(names(50, 0)).key
    size = (tmp_path / "probe" / f"{probe}.npz").stat().st_size
    registry = BiasingRegistry(bpe, cache_dir=tmp_path / "cache", disk_budget_bytes=int(size * 2.5))
    keys = [registry.compile(names(50, seed)).key for seed in (0, 1)]
    os.utime(tmp_path / "cache" / f"{keys[0]}.npz", (1, 1))
    os.utime(tmp_path / "cache" / f"{keys[1]}.npz", (2, 2))
    assert BiasingRegistry(bpe, cache_dir=tmp_path / "cache").compile(names(50, 0)).key == keys[0]  # touch a
    registry.compile(names(50, 2))
    remaining = {p.stem for p in (tmp_path / "cache").glob("*.npz")}
    assert keys[0] in remaining and keys[1] not in remaining and len(remaining) == 2


def test_streams_share_one_registration_until_the_last_release(bpe, multi_model) -> None:
    registry = BiasingRegistry(bpe, idle_keep_registered=0)
    compiled = registry.compile(TERMS)
    first, second = (
        registry.acquire(compiled, multi_model, 0.7),
        registry.acquire(compiled.key, multi_model, 0.7),
    )
    assert first.model_id == second.model_id and multi_model.num_models == 1
    model_id = first.model_id
    registry.release(first)
    registry.release(first)  # idempotent
    assert model_id not in multi_model.free_ids and second.model_id == model_id
    with pytest.raises(LeaseReleasedError):
        _ = first.model_id
    registry.release(second)
    assert model_id in multi_model.free_ids
    assert registry.stats().registered == 0 and registry.stats().active_leases == 0


def test_idle_registrations_are_kept_within_budget(bpe, multi_model) -> None:
    registry = BiasingRegistry(bpe, idle_keep_registered=1)
    a, b = registry.compile(TERMS), registry.compile(["metformin"])
    lease = registry.acquire(a, multi_model)
    model_id = lease.model_id
    registry.release(lease)
    assert model_id not in multi_model.free_ids  # idle, still registered: a reconnect is instant
    again = registry.acquire(a.key, multi_model)
    assert again.model_id == model_id
    registry.release(again)
    registry.release(registry.acquire(b, multi_model))  # b idles too; a is the least recently used
    assert model_id in multi_model.free_ids
    assert registry.drop_idle() == 1 and registry.stats().registered == 0


def test_acquire_never_compiles(bpe, multi_model) -> None:
    registry = BiasingRegistry(bpe)
    with pytest.raises(LookupError, match="not compiled"):
        registry.acquire(registry.key_for(TERMS), multi_model)


def _advance(multi_model: GPUBiasingMultiModel, model_ids: list[int], labels: list[list[int]]) -> np.ndarray:
    with torch.inference_mode():
        states = multi_model.get_init_states(len(model_ids))
        ids = torch.tensor(model_ids)
        outputs = []
        for step in range(len(labels[0])):
            scores, next_states = multi_model.advance(states, ids)
            outputs.append(scores.clone())
            column = torch.tensor([row[step] for row in labels])
            states = next_states[torch.arange(len(model_ids)), column]
        return torch.stack(outputs).numpy()


def test_removing_one_model_leaves_the_others_scores_unchanged(bpe, multi_model) -> None:
    registry = BiasingRegistry(bpe, idle_keep_registered=0)
    lists = [TERMS, ["metformin", "zolpidem tartrate"], names(40, 3), ["new york times"]]
    leases = [
        registry.acquire(registry.compile(terms), multi_model, 1.0 + i) for i, terms in enumerate(lists)
    ]
    texts = ["the Linezolid acme group", "Zolpidem metformin new", "new york times acme"]
    labels = [(bpe.encode(t) * 12)[:12] for t in texts]
    keep = [leases[0], leases[2], leases[3]]
    before = _advance(multi_model, [lease.model_id for lease in keep], labels)
    registry.release(leases[1])
    after = _advance(multi_model, [lease.model_id for lease in keep], labels)
    np.testing.assert_array_equal(before, after)
    assert np.abs(before).sum() > 0


def test_background_compile_does_not_stall_decode_steps(bpe, multi_model) -> None:
    decode_lock = threading.Lock()
    registry = BiasingRegistry(bpe, decode_lock=decode_lock)
    other = registry.acquire(registry.compile(TERMS), multi_model)
    events: list[str] = []
    done = threading.Event()

    def decode_loop() -> None:
        states = multi_model.get_init_states(64)
        ids = torch.full([64], other.model_id)
        while not done.is_set():
            with decode_lock, torch.inference_mode():
                multi_model.advance(states, ids)
            events.append("step")

    def compile_and_register() -> None:
        events.append("compile-start")
        compiled = registry.compile(names(5000, 9))
        events.append("compile-end")
        registry.acquire(compiled, multi_model)
        events.append("registered")

    loop = threading.Thread(target=decode_loop)
    loop.start()
    while "step" not in events:
        threading.Event().wait(0.001)
    worker = threading.Thread(target=compile_and_register)
    worker.start()
    worker.join()
    while events.count("step") < events.index("registered") + 3:
        threading.Event().wait(0.001)
    done.set()
    loop.join()
    start, end = events.index("compile-start"), events.index("compile-end")
    assert events[start:end].count("step") >= 3, "the decode loop kept stepping while the list compiled"
    registered = events.index("registered")
    assert events[registered - 1] == "step" or events[registered - 1] == "compile-end"
    assert "step" in events[registered + 1 :]


def test_unwritable_cache_still_compiles(bpe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(self: DiskCache, key: str, graph: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(DiskCache, "store", disk_full)
    registry = BiasingRegistry(bpe, cache_dir=tmp_path)
    registry.compile(TERMS).graph.validate()
    assert registry.stats().disk_write_errors == 1 and registry.stats().compiles == 1


def test_compile_in_a_worker_process_gives_the_same_arrays(bpe) -> None:
    in_thread = BiasingRegistry(bpe).compile(TERMS)
    with BiasingRegistry(bpe, compile_processes=1) as registry:
        in_process = registry.compile(TERMS)
        with pytest.raises(TermValidationError) as caught:
            registry.compile(["\u03a9mega", "acme", "\u03a9mega"])  # positions in the given list
    assert [(e.index, e.text) for e in caught.value.errors] == [(0, "\u03a9mega")]
    for name, array in in_thread.graph.arrays().items():
        np.testing.assert_array_equal(in_process.graph.arrays()[name], array)
    assert not in_process.graph.arc_weight.flags.writeable
