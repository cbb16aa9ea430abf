"""The contextual-biasing evaluation: the keyword metric (hand-computed and against NeMo), the set generator
(deterministic, rare terms absent from a training text) and a tiny end-to-end sweep on the random model."""

from __future__ import annotations

import csv
import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from eval.dataset import load_set, manifest_entry
from eval.generate import build_set, rare_words_in
from eval.metrics import KeywordCounts, corpus_keyword_counts, keyword_counts, normalize, score
from eval.runner import RunConfig, expand_configs, group_by_engine
from eval.sources import RarePools, camel_case, words_of

SYLLABLES = ("zor", "vex", "qua", "lin", "dar", "mox", "tel", "piv", "rau", "sen", "ko", "bri")


def fake_names(count: int, salt: int) -> tuple[str, ...]:
    """Distinct made-up lower-case words of three syllables (deterministic)."""
    combos = itertools.product(SYLLABLES, repeat=3)
    names = ["".join(c) for c in itertools.islice(combos, salt * count, (salt + 1) * count)]
    return tuple(sorted(names))


@pytest.fixture
def pools() -> RarePools:
    return RarePools(
        drug_generics=fake_names(40, 0),
        drug_brands=tuple(n.capitalize() for n in fake_names(40, 1)),
        invented_brands=tuple(n.capitalize() for n in fake_names(60, 2)),
        surnames=tuple(n.capitalize() for n in fake_names(40, 3)),
        first_names=("Anna", "Ben", "Carla"),
        brand_prefixes=("Zor", "Vex"),
    )


# --- metric ---------------------------------------------------------------------------------------------


def test_normalize_drops_punctuation_and_case() -> None:
    assert normalize("Sales of CaelMira, and Zytiga!  It's up.") == "sales of caelmira and zytiga it's up"
    assert normalize("Thank you, Karla Tolvanen.", keep_case=True) == "Thank you Karla Tolvanen"


@pytest.mark.parametrize(
    ("ref", "hyp", "expected"),
    [
        ("we use linezolid daily", "we use linezolid daily", KeywordCounts(tp=1, gt=1, fp=0)),
        ("take linezolid now", "take line zolid now", KeywordCounts(tp=0, gt=1, fp=0)),
        ("hello world", "hello linezolid", KeywordCounts(tp=0, gt=0, fp=1)),
        ("welcome to acme group today", "welcome to acme group today", KeywordCounts(tp=1, gt=1, fp=0)),
        ("welcome to acme group today", "welcome to acme grope today", KeywordCounts(tp=0, gt=1, fp=0)),
        ("welcome to the group today", "welcome to acme group today", KeywordCounts(tp=0, gt=0, fp=1)),
        ("linezolid and acme group", "linezolid and acme group", KeywordCounts(tp=2, gt=2, fp=0)),
    ],
)
def test_keyword_counts_hand_computed(ref: str, hyp: str, expected: KeywordCounts) -> None:
    assert keyword_counts(ref, hyp, {"linezolid", "acme group"}) == expected


def test_precision_recall_fscore() -> None:
    counts = KeywordCounts(tp=1, gt=2, fp=1)
    assert counts.precision == pytest.approx(0.5) and counts.recall == pytest.approx(0.5)
    assert counts.fscore == pytest.approx(0.5)
    assert KeywordCounts().fscore == 0.0


def test_cased_variant_checks_display_casing() -> None:
    refs = ["Sales of CaelMira grew.", "Continue linezolid twice daily."]
    hyps = ["sales of caelmira grew", "Continue linezolid twice daily"]
    scores = score(refs, hyps, ["CaelMira", "linezolid"])
    assert scores.lower.fscore == pytest.approx(1.0)
    assert scores.cased == KeywordCounts(tp=1, gt=2, fp=0)
    assert scores.wer == 0.0


def test_matches_nemo_compute_fscore(tmp_path: Path) -> None:
    from nemo.collections.asr.parts.context_biasing import compute_fscore

    rng = random.Random(0)
    words = "a b c d e f".split()
    keywords = ["a", "b c", "c d e", "f a"]
    compared = 0
    for trial in range(60):
        pairs = [
            (
                " ".join(rng.choices(words, k=rng.randint(1, 8))),
                " ".join(rng.choices(words, k=rng.randint(1, 8))),
            )
            for _ in range(rng.randint(1, 4))
        ]
        ours = corpus_keyword_counts([r for r, _ in pairs], [h for _, h in pairs], keywords)
        if ours.gt == ours.fp == 0:
            continue  # NeMo 3.0.0's compute_fscore raises on max() of an empty list when nothing matched
        manifest = tmp_path / f"{trial}.json"
        manifest.write_text("".join(json.dumps({"text": r, "pred_text": h}) + "\n" for r, h in pairs))
        expected = compute_fscore(str(manifest), keywords)
        assert (ours.precision, ours.recall, ours.fscore) == pytest.approx(expected, abs=1e-12)
        compared += 1
    assert compared > 30


# --- generator ------------------------------------------------------------------------------------------


def test_generator_is_deterministic(pools: RarePools) -> None:
    first = build_set(40, seed=0, pools=pools).to_json()
    assert first == build_set(40, seed=0, pools=pools).to_json()
    assert first != build_set(40, seed=1, pools=pools).to_json()


def test_set_structure(pools: RarePools) -> None:
    context_set = build_set(40, seed=3, pools=pools)
    terms, lists = context_set.terms, context_set.lists
    assert len(context_set.utterances) == 40
    assert {u.domain for u in context_set.utterances} == {"earnings", "clinical"}
    assert len({u.text for u in context_set.utterances}) == 40
    for utterance in context_set.utterances:
        assert 0 <= len(utterance.term_ids) <= 3
        for term_id in utterance.term_ids:
            assert terms[term_id].display in utterance.text
        ids = utterance.list_ids()
        if utterance.term_ids:
            assert lists[ids["local_list"]] == list(utterance.term_ids)
        else:
            assert ids["local_list"] is None
        assert set(utterance.term_ids) <= set(lists[ids["global_list"]])
    spoken = {tid for u in context_set.utterances for tid in u.term_ids}
    for key, ids in lists.items():
        if key.startswith("global/"):
            assert set(ids) - spoken, f"{key} has no distractors"
            assert set(ids) <= set(lists["full"])
    assert all(terms[tid].typed == terms[tid].display.lower() for tid in terms)
    assert any(terms[tid].typed != terms[tid].display for tid in terms)


def test_rare_terms_absent_from_training_text(pools: RarePools, tmp_path: Path) -> None:
    from eval.sources import training_vocabulary

    original = build_set(30, seed=0, pools=pools)
    leaked = sorted({w for t in original.terms.values() for w in t.rare_words})[:5]
    train_text = tmp_path / "train.txt"
    train_text.write_text(f"The {' and '.join(leaked)} were all mentioned.\nAnother line.\n")
    vocabulary = training_vocabulary(train_text)
    assert rare_words_in(original, vocabulary)
    rebuilt = build_set(30, seed=0, pools=pools.without(vocabulary))
    assert rare_words_in(rebuilt, vocabulary) == []
    assert not {w for t in rebuilt.terms.values() for w in words_of(t.display)} & set(leaked)


def test_festival_strings_are_escaped() -> None:
    from eval.dataset import _scheme_string

    assert _scheme_string('say "hi" \\ now') == '"say \\"hi\\" \\\\ now"'


def test_camel_case() -> None:
    assert camel_case("Caelmira", ("Cael", "Zol")) == "CaelMira"
    assert camel_case("Zolx", ("Zol",)) == "Zolx"


# --- runner ---------------------------------------------------------------------------------------------


def test_expand_configs_skips_parameters_that_do_not_apply() -> None:
    configs = expand_configs(
        ["none", "global"], ["lower", "insensitive"], ["greedy"], [1.12], [0.0, 1.0], [1.0]
    )
    names = [c.name for c in configs]
    assert names == [
        "none/greedy/1.12s",
        "global/lower/greedy/1.12s/alpha=1",
        "global/insensitive/greedy/1.12s/tau=0/alpha=1",
        "global/insensitive/greedy/1.12s/tau=1/alpha=1",
    ]
    groups = group_by_engine(configs)
    assert [len(g) for _, g in groups] == [2, 1, 1]  # no-biasing rides along with the first engine
    with pytest.raises(ValueError):
        expand_configs(["shared"], ["lower"], ["greedy"], [1.12], [0.5], [1.0])


def _write_tiny_set(out: Path, pools: RarePools) -> Path:
    """Three utterances of babble (the random model's text is meaningless) with the generator's lists."""
    context_set = build_set(3, seed=0, pools=pools)
    (out / "wav").mkdir(parents=True)
    rng = np.random.default_rng(0)
    entries = []
    for utterance, seconds in zip(context_set.utterances, (1.5, 2.3, 1.0), strict=True):
        audio = (0.3 * rng.standard_normal(round(seconds * 16000))).astype(np.float32)
        sf.write(str(out / "wav" / f"{utterance.utt_id}.wav"), audio, 16000, subtype="PCM_16")
        entries.append(manifest_entry(utterance, f"wav/{utterance.utt_id}.wav", seconds))
    (out / "manifest.json").write_text("".join(json.dumps(e) + "\n" for e in entries))
    (out / "lists.json").write_text(json.dumps(context_set.to_json()))
    return out / "manifest.json"


@pytest.mark.slow
def test_tiny_end_to_end(pools: RarePools, tmp_path: Path) -> None:
    from eval.__main__ import main
    from tests.support.tiny_model import build_tiny_transducer

    model = build_tiny_transducer(tmp_path / "model", kind="rnnt")
    manifest = _write_tiny_set(tmp_path / "set", pools)
    assert len(load_set(manifest).items) == 3
    out = tmp_path / "run"
    argv = [
        "run",
        "--manifest",
        str(manifest),
        "--model",
        str(model),
        "--biasing",
        "none,local,full",
        "--casing",
        "lower,insensitive",
        "--decoding",
        "greedy,beam",
        "--chunk",
        "0.56",
        "--alpha",
        "3.0",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    ran = [r for r in rows if not r["skipped"]]
    assert len(rows) == 2 * 5 and ran
    for row in ran:
        assert row["utterances"] == "3" and float(row["rtfx"]) > 0
        assert 0 <= float(row["fscore"]) <= 100 and float(row["wer"]) >= 0
    assert (out / "wer_vs_f.png").stat().st_size > 1000
    assert len(list((out / "hyps").glob("*.json"))) == len(ran)


def test_run_config_names_are_unique() -> None:
    configs = expand_configs(
        ["none", "local", "global", "full"],
        ["lower", "cased", "insensitive"],
        ["greedy", "beam"],
        [0.56, 1.12],
        [0.5],
        [1.0, 2.0],
    )
    assert len({c.name for c in configs}) == len(configs)
    assert RunConfig("none", None, "greedy", 1.12, None, None).engine_key() == ()


def test_a_run_with_defaults_measures_what_the_service_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.config import Settings, engine_config
    from eval.__main__ import build_parser, describe, served_engine_config

    monkeypatch.setenv("CAPTIONS_BIASING_ALPHA", "2.5")
    monkeypatch.setenv("CAPTIONS_BEAM_SIZE", "6")
    base = ["run", "--manifest", "m.json", "--model", "models/x.nemo"]
    served = served_engine_config(build_parser().parse_args(base))
    expected = engine_config(Settings(model="models/x.nemo"), vocabulary_cache_dir=None)
    assert served == expected
    assert (served.beam_size, served.biasing_alpha, served.lm_token_bonus) == (6, 2.5, 1.0)
    args = build_parser().parse_args([*base, "--beam-size", "2", "--lm", "none", "--right-context", "0"])
    flagged = served_engine_config(args)
    assert (flagged.beam_size, flagged.lm_path, flagged.right_context_s) == (2, None, 0.0)
    assert flagged.lm_alpha == expected.lm_alpha
    line = describe(served, build_parser().parse_args(base))
    assert "beam 6" in line and "alpha 2.5 (service)" in line


def test_trace_shows_each_modes_score_token_by_token(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m eval trace`` on the bundled tokenizer: the tree and the case-insensitive graph agree on
    the greedy lower-case tokens, a capitalised emission only scores in the case-insensitive graph and the
    target-cased tree, and a failed partial match is refunded."""
    from biasing.compile import build_graph
    from biasing.graph import GraphMode, GraphParams
    from eval.__main__ import main
    from eval.trace import load_adapter, mode_terms, trace

    adapter = load_adapter(Path("models/captions-embedded.nemo"))
    greedy, capital = adapter.ids("give linezolid"), adapter.ids("give Linezolid")
    totals = {}
    for mode in ("lower", "cased", "insensitive"):
        items, graph_mode = mode_terms(["Linezolid"], mode)
        graph = build_graph(items, adapter, GraphParams(mode=graph_mode, tau=0.5))
        totals[mode] = [np.cumsum([s.added for s in trace(graph, adapter, ids)]) for ids in (greedy, capital)]
    np.testing.assert_allclose(totals["insensitive"][0], totals["lower"][0], atol=1e-4)
    assert totals["lower"][1][-1] == 0.0
    assert totals["insensitive"][1][-1] == pytest.approx(totals["lower"][0][-1])
    assert totals["cased"][1][-1] > 0
    tree = build_graph(["linezolid"], adapter, GraphParams(mode=GraphMode.CASE_SENSITIVE_TREE))
    failed = trace(tree, adapter, adapter.ids("give lines"))
    assert sum(step.added for step in failed) == pytest.approx(0.0, abs=1e-6)
    assert any(step.refund < 0 for step in failed)

    assert main(["trace", "--terms", "Linezolid", "--text", "give Linezolid", "--pieces", "▁ L ine"]) == 0
    out = capsys.readouterr().out
    assert out.count("## ") == 3 and "labels enter the graph at the root" in out and "| `▁L` |" in out


def test_f_shown_scores_the_captions_after_the_services_display_rewrite() -> None:
    """``F shown``: each hypothesis through the service's display-form rewrite with its utterance's list as a
    user keeps it (typed lower case, display form given), then F with the display casing."""
    from eval.dataset import EvalItem, EvalSet
    from eval.report import shown_hyps

    items = tuple(
        EvalItem(f"u{i}", Path(f"/x/u{i}.wav"), 1.0, text, "g", {"global": "L", "local": None})
        for i, text in enumerate(["We use GlobalSign now.", "Switch to linezolid today."])
    )
    eval_set = EvalSet(
        items,
        {"t1": {"display": "GlobalSign", "typed": "globalsign"}, "t2": {"display": "linezolid"}},
        {"L": ["t1", "t2"]},
    )
    hyps = ["We use globalsign now.", "Switch to Linezolid today."]
    assert shown_hyps(hyps, eval_set, "global") == ["We use GlobalSign now.", "Switch to linezolid today."]
    assert shown_hyps(hyps, eval_set, "none") == hyps
