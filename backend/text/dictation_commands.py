"""Spoken dictation commands: carried out, never written ("new paragraph", "full stop", "scratch that", ...).

The same list and rules as the dictation page (``frontend/static/js/dictation-commands.js``); both are
tested against ``tests/fixtures/dictation_commands_cases.json``. ``dictate`` adds one utterance to a note
(the page's note); ``cue_texts`` gives each stored final of a dictation its text for the caption files and
the previews (a command's words dropped, its punctuation on the cue, a scratched cue left out).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    say: tuple[str, ...]
    insert: str = ""
    capitalize: bool = False
    scratch: bool = False


COMMANDS = (
    Command(("new paragraph", "next paragraph"), "\n\n", capitalize=True),
    Command(("new line", "next line"), "\n", capitalize=True),
    Command(("full stop", "period"), ".", capitalize=True),
    Command(("comma",), ","),
    Command(("question mark",), "?", capitalize=True),
    Command(("exclamation mark", "exclamation point"), "!", capitalize=True),
    Command(("scratch that", "delete that"), scratch=True),
)
_BY_PHRASE = {phrase: command for command in COMMANDS for phrase in command.say}
_PHRASES = sorted(_BY_PHRASE, key=len, reverse=True)
PATTERN = re.compile(
    r"\s*(?<![\w'’-])(" + "|".join(p.replace(" ", r"\s+") for p in _PHRASES) + r")(?![\w'’-])[\s,;:.!?]*",
    re.IGNORECASE,
)
TRAILING_MARKS = re.compile(r"[\s,;:.!?]*$")
BREAK_TRAILING = re.compile(r"[\s,;:]*$")
"""Before a break a sentence keeps its full stop; a comma or spaces go."""
MAX_HISTORY = 50


def parse_utterance(text: str) -> list[str | Command]:
    """One utterance's words (str) and commands in order."""
    out: list[str | Command] = []
    last = 0
    for match in PATTERN.finditer(text):
        if match.start() > last:
            out.append(text[last : match.start()])
        out.append(_BY_PHRASE[" ".join(match.group(1).lower().split())])
        last = match.end()
    if last < len(text):
        out.append(text[last:])
    return out


def _capitalize_first(text: str) -> str:
    """Capitalise a leading letter: "plan" -> "Plan"; "10% better" stays as it is."""
    return text[0].upper() + text[1:] if text[:1].isalpha() else text


def dictate(
    note: str, text: str, new_paragraph: bool = False, history: Sequence[str] = ()
) -> tuple[str, list[str]]:
    """The note after one utterance, and the history to pass next time (the note before each utterance):
    words follow after a space; punctuation joins the previous word and capitalises the next; "new
    paragraph" / "new line" break; "scratch that" removes what this utterance said so far, else the
    previous utterance. ``new_paragraph``: a long pause came before it."""
    result = note
    stack = list(history)
    said = False
    if new_paragraph and result.strip():
        result = result.rstrip() + "\n\n"
    start = result
    capitalize = result.endswith("\n")  # after a break, said now or in an earlier utterance
    for part in parse_utterance(text):
        if isinstance(part, str):
            words = part.strip()
            if not words:
                continue
            if capitalize:
                words = _capitalize_first(words)
            result += ("" if not result or result[-1].isspace() else " ") + words
            capitalize, said = False, True
        elif part.scratch:
            if said:
                result, said = start, False
            elif stack:
                result = stack.pop()
            capitalize = False
        else:
            if part.insert.strip():
                if not result.strip():
                    continue
                result = TRAILING_MARKS.sub("", result) + part.insert
            elif result.strip():
                result = BREAK_TRAILING.sub("", result) + part.insert
            capitalize, said = part.capitalize, True
    if said and result != note:
        stack = [*stack, note][-MAX_HISTORY:]
    return result, stack


def cue_texts(texts: Sequence[str]) -> list[str | None]:
    """Each final's text with the commands carried out, for caption files: a command's words are dropped,
    its punctuation ends the cue (or the previous cue, when said alone), a break only capitalises what
    follows, and "scratch that" leaves out what its final said before it, else the previous cue (None)."""
    out: list[str | None] = []
    capitalize = False
    for text in texts:
        own = ""
        for part in parse_utterance(text):
            if isinstance(part, str):
                words = part.strip()
                if words:
                    own = (own + " " if own else "") + (_capitalize_first(words) if capitalize else words)
                    capitalize = False
            elif part.scratch:
                if own:
                    own = ""
                else:
                    kept = [i for i, cue in enumerate(out) if cue]
                    if kept:
                        out[kept[-1]] = None
            else:
                mark = part.insert.strip()
                if mark and own:
                    own = TRAILING_MARKS.sub("", own) + mark
                elif mark:
                    kept = [i for i, cue in enumerate(out) if cue]
                    if kept:
                        out[kept[-1]] = TRAILING_MARKS.sub("", out[kept[-1]] or "") + mark
                capitalize = part.capitalize
        out.append(own or None)
    return out
