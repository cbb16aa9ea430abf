"""The second pass's decisions (issue 24, issue 35): its settings, the guards that decide whether Whisper's
text replaces the first pass's (``judge``), and the text and timing helpers they use. Pure: no model, no
torch; ``backend.engine.final_pass`` runs the model and calls these."""

from __future__ import annotations

import difflib
import re
import zlib
from dataclasses import dataclass
from typing import Any

from backend.engine.types import FINAL_PASS_ARBITRATIONS, Final, Word
from captions_model.words import edit_distance

_WORD = re.compile(r"[a-z0-9']+")

ARBITRATIONS = FINAL_PASS_ARBITRATIONS
"""How a second-pass reading that disagrees with the first pass's is judged (``FinalPassConfig.arbitration``):
``agreement`` keeps the first pass's text; ``confidence`` takes Whisper's where Whisper is confident of it
(average log-probability per token >= ``confident_logprob``); ``scored`` takes Whisper's where Whisper,
scoring both texts on the audio, prefers its own by at least ``score_margin`` nats per token."""


@dataclass(frozen=True)
class FinalPassConfig:
    """How the second pass runs and when its text is kept. Defaults are the measured operating point
    (models/MODEL_CARD.md, "Second pass")."""

    model: str
    beam_size: int = 4
    biasing_alpha: float = 1.5
    pad_s: float = 2.0
    min_avg_logprob: float = -2.0
    no_speech_prob: float = 0.6
    no_speech_logprob: float = -1.0
    max_disagreement: float = 0.6
    max_skipped_words: int = 5  # a run of this many first-pass words Whisper has nothing for: it skipped
    max_words_per_s: float = 6.0
    max_compression: float = 2.4
    min_window_s: float = 1.0
    int8_decoder: bool = True
    max_term_deficit: float | None = None  # None: terms are not checked against an unboosted decode
    evidence_margin: float | None = None  # boost only tokens this close to Whisper's best (None: all)
    arbitration: str = "scored"  # one of ARBITRATIONS
    confident_logprob: float = -0.5  # "confidence"; and a live re-read rewrites words on screen only above it
    score_margin: float = 0.5
    skip_margin: float = 1.0  # "scored": Whisper's reading with words skipped needs this much more
    refine_partials_s: float = 1.5  # re-read the open utterance this often (0: never; live refinement)
    refine_min_s: float = 2.0  # once it is this long


@dataclass(frozen=True)
class Readings:
    """Both readings of one final scored by Whisper on its audio: the teacher-forced average log-probability
    per token (end-of-text included) of the first pass's text and of the second pass's, both written in the
    first pass's style (``spoken_text``)."""

    first_logprob: float
    second_logprob: float


@dataclass(frozen=True)
class FinalVocabulary:
    """A stream's vocabulary as the second pass uses it: the graph compiled for Whisper's tokens (applied by
    a ``biasing.scorer.GraphScorer``) and the registration's term finder, which checks that no term the first
    pass found is lost."""

    scorer: Any
    finder: Any


@dataclass(frozen=True)
class Refinement:
    """What the second pass decided for one final (for tests, logs and the evaluation)."""

    final: Final | None
    reason: str  # "second", or why the first pass's text stands / the final was dropped
    second_text: str = ""
    checks: tuple[Any, ...] = ()  # ``term_check.TermCheck`` of each term the committed text held
    avg_logprob: float | None = None  # Whisper's average log-probability per token of ``second_text``


UNCHECKED = frozenset({"too_short", "too_long"})  # Whisper did not read these windows
ACCEPTED = frozenset({"second", "second_terms_kept"})  # the second pass's text is committed
SETTLED = ACCEPTED | UNCHECKED  # outcomes after which the unboosted reading is not tried


LONE_WORDS = frozenset(
    "yes no ok hi bye hey yep yup nah why who how what now not see sir mom dad two six ten one"
    " thanks okay right sure good fine great done next stop wait".split()
)
"""Short words that are a whole caption on their own ("Yes.", "Why?"): never taken for noise."""
MAX_JUNK_LETTERS = 3


def lone_junk_word(text: str, vocabulary: FinalVocabulary | None = None) -> bool:
    """A final of one short word that is not a whole answer nor a vocabulary term: what the streaming pass
    writes on a breath, a click or noise ("A", "Re", "pio"; issue 39)."""
    words = words_of(text)
    if len(words) != 1 or len(words[0]) > MAX_JUNK_LETTERS or words[0] in LONE_WORDS:
        return False
    return not (vocabulary is not None and vocabulary.finder.find(text))


def spoken_text(text: str, heard: str | None = None) -> str:
    """A Whisper hypothesis in the first pass's style, as the guards compare it: without a trailing copy of
    its own beginning (``strip_repeat``) unless the first pass's text (``heard``) has that copy too, i.e. the
    speaker did say it twice (then cutting it would drop words that were said)."""
    from captions_model.spoken_form import to_spoken_form

    spoken = to_spoken_form(text).strip()
    stripped = strip_repeat(spoken)
    if (
        heard is not None
        and stripped != spoken
        and disagreement(heard, spoken) < disagreement(heard, stripped)
    ):
        stripped = spoken
    return capitalized(stripped)


def judge(
    config: FinalPassConfig,
    final: Final,
    hyp: Any,
    duration_s: float,
    token_cap: int,
    vocabulary: FinalVocabulary | None = None,
    readings: Readings | None = None,
) -> Refinement:
    """Apply the guards to one second-pass hypothesis (``tokens``, ``text``, ``avg_logprob``,
    ``no_speech_prob``): the final to commit, or None to drop it, and why. ``readings``: both texts scored by
    Whisper, which the ``scored`` arbitration needs where they disagree (without them it keeps the first
    pass's text)."""
    text = spoken_text(hyp.text, final.text)
    unsure = hyp.avg_logprob < config.min_avg_logprob
    if lone_junk_word(final.text, vocabulary) and (
        not text or unsure or hyp.no_speech_prob >= config.no_speech_prob or lone_junk_word(text, vocabulary)
    ):  # Whisper hears no more than noise there either: any window length, before "too_short" keeps it
        return Refinement(None, "junk_word", text)
    if hyp.no_speech_prob >= config.no_speech_prob and (
        hyp.avg_logprob < config.no_speech_logprob or not text
    ):
        return Refinement(None, "no_speech", text)
    if duration_s < config.min_window_s:  # too short to read: Whisper may only say it was not speech
        if (
            hyp.no_speech_prob >= config.no_speech_prob
            and disagreement(final.text, text) > config.max_disagreement
        ):
            return Refinement(None, "no_speech", text)
        return Refinement(final, "too_short", text)
    if not text:
        return Refinement(final, "empty", text)
    if unsure:
        return Refinement(final, "unsure", text)
    if len(hyp.tokens) >= token_cap:
        return Refinement(final, "token_limit", text)
    if len(text.split()) > config.max_words_per_s * duration_s + 2:
        return Refinement(final, "too_many_words", text)
    if repeats(text) or compression_ratio(text) > config.max_compression:
        return Refinement(final, "repeats", text)
    if disagreement(final.text, text) > config.max_disagreement:
        if hyp.no_speech_prob >= config.no_speech_prob:  # the streaming pass's word in a pause ("The")
            return Refinement(None, "no_speech", text)
        if not second_wins(config, hyp, readings):
            return Refinement(final, "disagrees", text)
    if skipped_words(final.text, text) >= config.max_skipped_words and not (  # e.g. a sentence of a long
        readings is not None and readings.second_logprob >= readings.first_logprob + config.skip_margin
    ):  # window, unless Whisper finds the first pass's words there far less likely than its own reading
        return Refinement(final, "dropped_words", text)
    if vocabulary is not None:
        found = set(vocabulary.finder.find(final.text))
        if found - set(vocabulary.finder.find(text)):
            text = splice_terms(final.text, text, vocabulary.finder)
            if found - set(vocabulary.finder.find(text)):
                return Refinement(final, "term_lost", text)
            return Refinement(with_text(final, text), "second_terms_kept", text)
    return Refinement(with_text(final, text), "second", text)


def second_wins(config: FinalPassConfig, hyp: Any, readings: Readings | None) -> bool:
    """Whether a second-pass reading that disagrees with the first pass's (and passed every guard against
    Whisper's failures before) replaces it, by ``config.arbitration`` (``ARBITRATIONS``)."""
    if config.arbitration == "confidence":
        return bool(hyp.avg_logprob >= config.confident_logprob)
    if config.arbitration == "scored":
        return (
            readings is not None and readings.second_logprob >= readings.first_logprob + config.score_margin
        )
    return False


def needs_readings(config: FinalPassConfig, final: Final, hyp: Any) -> bool:
    """Whether ``judge`` may use both readings scored (the ``scored`` arbitration, where they disagree or
    Whisper's reading has nothing for a run of the first pass's words)."""
    if config.arbitration != "scored":
        return False
    text = spoken_text(hyp.text, final.text)
    return (
        disagreement(final.text, text) > config.max_disagreement
        or skipped_words(final.text, text) >= config.max_skipped_words
    )


def strip_repeat(text: str, min_words: int = 3) -> str:
    """``text`` without a trailing copy of its own beginning: Whisper, given a short window, often says the
    utterance again ("A cloth of olive. A cloth of olive."). The earliest split whose tail (>= ``min_words``
    words) repeats the start word for word (case and marks ignored) ends the text."""
    words = text.split()
    bare = [_bare(w) for w in words]
    for split in range(1, len(words) - min_words + 1):
        tail = bare[split:]
        if tail == bare[: len(tail)]:
            return " ".join(words[:split])
    return text


def capitalized(text: str) -> str:
    """A final starts with a capital, as the first pass writes it."""
    return text[:1].upper() + text[1:]


def splice_terms(first: str, second: str, finder: Any) -> str:
    """``second`` with the first pass's words put back wherever the two differ around a vocabulary term the
    first pass found (so a term survives and the second pass's other corrections stay)."""
    first_words, second_words = first.split(), second.split()
    covered: set[int] = set()
    offset = 0
    starts = []
    for word in first_words:
        offset = first.index(word, offset)
        starts.append((offset, offset + len(word)))
        offset += len(word)
    for match in finder.spans(first):
        covered.update(i for i, (a, b) in enumerate(starts) if a < match.end and b > match.start)
    matcher = difflib.SequenceMatcher(
        a=[_bare(w) for w in first_words], b=[_bare(w) for w in second_words], autojunk=False
    )
    out: list[str] = []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag != "equal" and covered.intersection(range(a0, a1)):
            out.extend(first_words[a0:a1])
        else:
            out.extend(second_words[b0:b1])
    return " ".join(out)


def _bare(word: str) -> str:
    return word.lower().strip(",.?!")


def covered(partial: str, reading: str) -> int:
    """How many of the first pass's ``partial`` words the second pass's ``reading`` of the same audio covers:
    up to its last word that the reading also has (aligned case- and mark-insensitively), and as many more as
    the reading has words after that one. Whisper often leaves out a word cut off at the window's end, which
    then stays in the first pass's tail."""
    first, second = [_bare(w) for w in partial.split()], [_bare(w) for w in reading.split()]
    blocks = [
        b
        for b in difflib.SequenceMatcher(None, first, second, autojunk=False).get_matching_blocks()
        if b.size
    ]
    if not blocks:
        return len(first)
    last = blocks[-1]  # words the reading has after it stand for as many of the first pass's (misheard)
    return min(len(first), last.a + last.size + len(second) - (last.b + last.size))


def rewrites(shown: str, reading: str) -> bool:
    """Whether ``reading`` changes a word of ``shown`` (case and marks ignored) instead of only adding words
    after them: what a screen showing ``shown`` would see flicker."""
    before, after = [_bare(w) for w in shown.split()], [_bare(w) for w in reading.split()]
    return after[: len(before)] != before


def max_tokens_for(duration_s: float) -> int:
    """The most tokens an utterance this long may produce (~7 tokens/s at a fast speaking rate, plus room)."""
    return int(8 * duration_s) + 8


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def disagreement(reference: str, hypothesis: str) -> float:
    """Word error rate of ``hypothesis`` against ``reference`` (lower-cased, marks dropped); 1.0 if empty."""
    ref, hyp = words_of(reference), words_of(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    return edit_distance(ref, hyp) / len(ref)


def skipped_words(first: str, second: str) -> int:
    """The longest run of ``first``'s words that ``second`` has nothing for (a deletion in their word
    alignment, less what a replacement puts in its place): Whisper skips a sentence of a long window, while
    its corrections ("cold hardened" -> "cold-hearted") replace words one for one."""
    a = [w for word in words_of(first) for w in word.split("-")]
    b = [w for word in words_of(second) for w in word.split("-")]
    runs = [
        (i2 - i1) - (j2 - j1)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if tag in ("delete", "replace")
    ]
    return max(runs, default=0)


def repeats(text: str, times: int = 3) -> bool:
    """True when some word n-gram (n = 1..4) occurs ``times`` times back to back (Whisper's loops)."""
    words = words_of(text)
    for n in range(1, 5):
        for start in range(len(words) - n * times + 1):
            gram = words[start : start + n]
            if all(words[start + k * n : start + (k + 1) * n] == gram for k in range(1, times)):
                return True
    return False


def compression_ratio(text: str) -> float:
    """Bytes over zlib-compressed bytes (Whisper's loop detector: > 2.4 is a loop)."""
    data = text.encode()
    return len(data) / max(1, len(zlib.compress(data))) if len(data) > 40 else 1.0


def with_text(final: Final, text: str) -> Final:
    """``final`` with the second pass's text; word times from the first pass's words, aligned by content."""
    new_words = text.split()
    old = list(final.words)
    if not old:
        span = (final.start_s, final.end_s)
        old = [Word(final.text, *span)]
    matcher = difflib.SequenceMatcher(
        a=[_bare(w.text) for w in old],
        b=[_bare(w) for w in new_words],
        autojunk=False,
    )
    times: list[tuple[float, float] | None] = [None] * len(new_words)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "insert":
            continue
        if tag == "equal":
            for k in range(b1 - b0):
                times[b0 + k] = (old[a0 + k].start_s, old[a0 + k].end_s)
            continue
        # replaced: spread the old words' span over the new ones
        start, end = old[a0].start_s, old[a1 - 1].end_s
        step = (end - start) / max(1, b1 - b0)
        for k in range(b1 - b0):
            times[b0 + k] = (start + k * step, start + (k + 1) * step)
    filled = _fill_times(times, final.start_s, final.end_s)
    words = tuple(Word(w, s, e) for w, (s, e) in zip(new_words, filled, strict=True))
    start_s = words[0].start_s if words else final.start_s
    end_s = words[-1].end_s if words else final.end_s
    return Final(text=text, start_s=start_s, end_s=end_s, words=words, source="second")


def _fill_times(
    times: list[tuple[float, float] | None], start_s: float, end_s: float
) -> list[tuple[float, float]]:
    """Inserted words (no time yet) take the gap between their timed neighbours, shared equally."""
    out: list[tuple[float, float]] = []
    i = 0
    while i < len(times):
        known = times[i]
        if known is not None:
            out.append(known)
            i += 1
            continue
        j = i
        while j < len(times) and times[j] is None:
            j += 1
        left = out[-1][1] if out else start_s
        right_time = times[j] if j < len(times) else None
        right = right_time[0] if right_time is not None else end_s
        right = max(right, left)
        step = (right - left) / (j - i)
        out.extend((left + k * step, left + (k + 1) * step) for k in range(j - i))
        i = j
    return out


STUTTER_WORD_S = 0.12
"""A word this short (1.5 encoder frames) repeated on consecutive frames is the streaming model's loop, not
speech: "every every every every every everyone" on a synthetic "Good morning everyone" (issue 39)."""


def collapse_stutter(words: tuple[Word, ...]) -> tuple[Word, ...]:
    """``words`` without the streaming model's stutter: a run of two or more identical one-frame words is
    dropped when the next word starts with it ("every every everyone" -> "everyone"), and kept once when
    three or more stand alone. Words said at a speaking pace (longer than ``STUTTER_WORD_S``) are kept."""
    out: list[Word] = []
    i = 0
    while i < len(words):
        bare = _bare(words[i].text)
        j = i
        while (
            j < len(words)
            and _bare(words[j].text) == bare
            and words[j].end_s - words[j].start_s <= STUTTER_WORD_S
            and (j == i or words[j].start_s - words[j - 1].end_s <= STUTTER_WORD_S)
        ):
            j += 1
        run = j - i
        following = _bare(words[j].text) if j < len(words) else ""
        if bare and run >= 2 and following.startswith(bare) and following != bare:
            i = j  # the loop ran ahead of the word it became
        elif bare and run >= 3:
            out.append(words[j - 1])
            i = j
        else:
            out.append(words[i])
            i += 1
    return tuple(out)
