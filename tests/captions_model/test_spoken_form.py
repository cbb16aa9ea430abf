"""``captions_model.spoken_form``: Whisper's written form rewritten in the first pass's spoken style.

Each rule has its own cases; every output is also checked against ``ALLOWED_TEXT`` (the first pass's
character set, ``eval/sentences.py`` ``ALLOWED``), and the style is pinned to the eval references."""

from __future__ import annotations

import random
import re

import pytest

from captions_model.spoken_form import (
    ALLOWED_TEXT,
    COMPOUND_JOINER,
    number_to_words,
    ordinal_words,
    to_spoken_form,
)
from eval.generate import DOSES, MONEY, PERCENTS
from eval.sentences import ALLOWED


def spoken(text: str) -> str:
    out = to_spoken_form(text)
    assert ALLOWED_TEXT.match(out), (text, out)
    return out


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "zero"),
        (7, "seven"),
        (13, "thirteen"),
        (21, "twenty one"),
        (100, "one hundred"),
        (101, "one hundred and one"),
        (250, "two hundred and fifty"),
        (1000, "one thousand"),
        (1050, "one thousand and fifty"),
        (1250, "one thousand two hundred and fifty"),
        (1_000_001, "one million and one"),
        (2_000_000_000, "two billion"),
        (
            123_456_789,
            "one hundred and twenty three million four hundred and fifty six thousand seven hundred "
            "and eighty nine",
        ),
        (-5, "minus five"),
    ],
)
def test_number_to_words(n: int, words: str) -> None:
    assert number_to_words(n) == words


def test_huge_numbers_are_read_digit_by_digit() -> None:
    assert number_to_words(10**18) == "one" + " zero" * 18


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (1, "first"),
        (2, "second"),
        (3, "third"),
        (5, "fifth"),
        (8, "eighth"),
        (9, "ninth"),
        (12, "twelfth"),
        (20, "twentieth"),
        (21, "twenty first"),
        (100, "one hundredth"),
        (1000, "one thousandth"),
    ],
)
def test_ordinal_words(n: int, words: str) -> None:
    assert ordinal_words(n) == words


def test_style_matches_the_eval_references() -> None:
    """The references say "two hundred and fifty", "twenty two", "zero point five", "one point two billion":
    these written forms must come out exactly so."""
    assert "two hundred and fifty milligrams" in DOSES and "twenty two percent" in PERCENTS
    assert COMPOUND_JOINER == " "
    assert spoken("Take 250 mg.") == "Take two hundred and fifty milligrams."
    assert spoken("0.5 mg") == "Zero point five milligrams"
    assert spoken("1 g") == "One gram"
    assert spoken("grew 22%") == "grew twenty two percent"
    assert spoken("$1.2 billion") == "One point two billion dollars"
    assert spoken("$400 million") == "Four hundred million dollars"
    assert {"one point two billion dollars", "four hundred million dollars"} <= set(MONEY)


def test_allowed_text_is_the_training_character_set() -> None:
    sample = "Hello, it's a well-known fact. Isn't it? Yes!"
    assert ALLOWED_TEXT.match(sample) and ALLOWED.match(sample)
    assert ALLOWED_TEXT.match("")
    for bad in ("5", "$", ";", ":", '"', "é", "—"):
        assert not ALLOWED_TEXT.match(bad) and not ALLOWED.match(bad)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("Take 600 mg twice daily.", "Take six hundred milligrams twice daily."),
        ("We saw 1,250 patients.", "We saw one thousand two hundred and fifty patients."),
        ("It rose by 5.2 points.", "It rose by five point two points."),
        ("It is 5.25 now.", "It is five point two five now."),
        ("The value was .5 today.", "The value was point five today."),
        ("Agent 007 arrived.", "Agent zero zero seven arrived."),
        ("It fell to -5 overnight.", "It fell to minus five overnight."),
        ("It fell to −3.5 overnight.", "It fell to minus three point five overnight."),
        ("5 patients were seen.", "Five patients were seen."),
        ("Count 1,2,3.", "Count one, two, three."),
        ("Version 1.2.3 shipped.", "Version one point two point three shipped."),
    ],
)
def test_cardinals_decimals_and_negatives(written: str, expected: str) -> None:
    assert spoken(written) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("The 3rd item.", "The third item."),
        ("On the 21st floor.", "On the twenty first floor."),
        ("The 2nd, 12th and 100th runs.", "The second, twelfth and one hundredth runs."),
        ("The 1,000th visitor.", "The one thousandth visitor."),
        ("On March 15th.", "On March fifteenth."),
    ],
)
def test_ordinals(written: str, expected: str) -> None:
    assert spoken(written) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("In 2026 we grew.", "In twenty twenty six we grew."),
        ("Born in 1999.", "Born in nineteen ninety nine."),
        ("Since 2005.", "Since two thousand and five."),
        ("Since 2000.", "Since two thousand."),
        ("By 2010.", "By twenty ten."),
        ("In 1905.", "In nineteen oh five."),
        ("In 1900.", "In nineteen hundred."),
        ("In 1100.", "In eleven hundred."),
        ("In 2099.", "In twenty ninety nine."),
        ("In 2100.", "In two thousand one hundred."),
        ("In 1099.", "In one thousand and ninety nine."),
        ("We had 2,026 calls.", "We had two thousand and twenty six calls."),
        ("Take 1500 mg.", "Take one thousand five hundred milligrams."),
        ("Paid $2026.", "Paid two thousand and twenty six dollars."),
        ("Up 2000%.", "Up two thousand percent."),
        ("The 1990s and the '60s.", "The nineteen nineties and the sixties."),
        ("The 2000s.", "The two thousands."),
        ("From 2020-2021.", "From twenty twenty to twenty twenty one."),
    ],
)
def test_years_and_decades(written: str, expected: str) -> None:
    assert spoken(written) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("Up 50%.", "Up fifty percent."),
        ("Up 50 %.", "Up fifty percent."),
        ("Up 1.5% only.", "Up one point five percent only."),
        ("Down -3%.", "Down minus three percent."),
        ("Margins rose 5%-10%.", "Margins rose five percent to ten percent."),
    ],
)
def test_percentages(written: str, expected: str) -> None:
    assert spoken(written) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("It costs $5.", "It costs five dollars."),
        ("It costs $1.", "It costs one dollar."),
        ("Revenue was $5.2 million.", "Revenue was five point two million dollars."),
        ("Revenue was $5.2M.", "Revenue was five point two million dollars."),
        ("Revenue was $1.2bn.", "Revenue was one point two billion dollars."),
        ("Revenue was $90 billion.", "Revenue was ninety billion dollars."),
        ("A $5k bonus.", "A five thousand dollars bonus."),
        ("It costs $5.25.", "It costs five dollars and twenty five cents."),
        ("It costs $1.01.", "It costs one dollar and one cent."),
        ("It costs $0.99.", "It costs ninety nine cents."),
        ("It costs $5.00.", "It costs five dollars."),
        ("It costs $1,250.", "It costs one thousand two hundred and fifty dollars."),
        ("It costs €5.", "It costs five euros."),
        ("It costs €1.", "It costs one euro."),
        ("It costs £5.50.", "It costs five pounds and fifty pence."),
        ("It costs £1.", "It costs one pound."),
        ("It costs ¥500.", "It costs five hundred yen."),
        ("A loss of -$5 million.", "A loss of minus five million dollars."),
        ("Guidance is $5-10 million.", "Guidance is five to ten million dollars."),
        ("Between $5-$10.", "Between five to ten dollars."),
    ],
)
def test_currency(written: str, expected: str) -> None:
    assert spoken(written) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("Meet at 10:30.", "Meet at ten thirty."),
        ("Meet at 10:05.", "Meet at ten oh five."),
        ("Meet at 9:00.", "Meet at nine o'clock."),
        ("Meet at 9:00 a.m. today.", "Meet at nine a.m. today."),
        ("Meet at 9:30 PM today.", "Meet at nine thirty p.m. today."),
        ("Meet at 9am today.", "Meet at nine a.m. today."),
        ("Meet at 9 p.m.", "Meet at nine p.m."),
        ("From 10:30-11:00.", "From ten thirty to eleven o'clock."),
        ("A ratio of 3:1.", "A ratio of three to one."),
        ("Not a time 25:00.", "Not a time twenty five to zero zero."),
        # issue 39: "ten thirty" heard, "1030" / "10.30" written: a time, never "one thousand and thirty"
        ("Meet at 1030.", "Meet at ten thirty."),
        ("Meet at 10.30 tomorrow.", "Meet at ten thirty tomorrow."),
        ("Back by 0930 hours.", "Back by nine thirty hours."),
        ("Until 1130am.", "Until eleven thirty a.m."),
        ("We saw 1030 patients.", "We saw one thousand and thirty patients."),
        ("Up to 1030 patients.", "Up to one thousand and thirty patients."),
        ("Priced at 10.50 dollars.", "Priced at ten point five zero dollars."),
        ("Give 250 mg at 1030.", "Give two hundred and fifty milligrams at ten thirty."),
        ("At 1030 mg.", "At one thousand and thirty milligrams."),
        ("At 2400.", "At two thousand four hundred."),
    ],
)
def test_times(written: str, expected: str) -> None:
    assert spoken(written) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("Take 600 mg.", "Take six hundred milligrams."),
        ("Take 1 mg.", "Take one milligram."),
        ("Take 600mg.", "Take six hundred milligrams."),
        ("Give 5 ml or 5 mL.", "Give five milliliters or five milliliters."),
        ("Weighs 70 kg.", "Weighs seventy kilograms."),
        ("Ran 5 km.", "Ran five kilometers."),
        ("Take 2 g.", "Take two grams."),
        ("Take 50 mcg or 50 µg.", "Take fifty micrograms or fifty micrograms."),
        ("Give 5 mg/kg.", "Give five milligrams per kilogram."),
        ("Give 5-10 mg.", "Give five to ten milligrams."),
        ("Give 0.5-1 mg.", "Give zero point five to one milligrams."),
        ("BP 120 mmHg.", "BP one hundred and twenty millimeters of mercury."),
        ("It was -5°C.", "It was minus five degrees Celsius."),
        ("It was 98.6 °F.", "It was ninety eight point six degrees Fahrenheit."),
        ("Every 4 h.", "Every four hours."),
        ("Take it 3x daily.", "Take it three times daily."),
    ],
)
def test_units(written: str, expected: str) -> None:
    assert spoken(written) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("Pages 5-10.", "Pages five to ten."),
        ("Pages 5–10.", "Pages five to ten."),
        ("Pages 5 - 10.", "Pages five to ten."),
        ("A 5-year-old boy.", "A five-year-old boy."),
    ],
)
def test_ranges_and_number_compounds(written: str, expected: str) -> None:
    assert spoken(written) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("Dr. Smith & Mr. Jones.", "Dr. Smith and Mr. Jones."),
        ("Mrs. Brown and Ms. Green.", "Mrs. Brown and Ms. Green."),
        ("Note: this; that.", "Note, this, that."),
        ("It was — I think — fine.", "It was, I think, fine."),
        ("It was – fine.", "It was, fine."),
        ("It was - fine -- really.", "It was, fine, really."),
        ('He said "hello" to me.', "He said hello to me."),
        ("He said “hello” to me.", "He said hello to me."),
        ("He said 'yes'. The dogs' bowls.", "He said yes. The dogs' bowls."),
        ("I don’t know.", "I don't know."),
        ("See (below) [here] {there}.", "See below here there."),
        ("And then...", "And then."),
        ("Wait... what?", "Wait, what?"),
        ("Wait… What?", "Wait. What?"),
        ("Really?!", "Really?"),
        ("Hello  ,  world  .", "Hello, world."),
        ("A café in Zürich.", "A cafe in Zurich."),
        ("2+2=4", "Two plus two equals four"),
        ("and then 5 more", "and then five more"),
        ("He is 5'10\" tall.", "He is five foot ten tall."),
        ("Pre-2020 levels.", "Pre twenty twenty levels."),
        ("It was 37℃ with ５ people.", "It was thirty seven degrees Celsius with five people."),
        ("Take ½ tablet.", "Take one half tablet."),
        ("At 9 a.m., we met.", "At nine a.m. we met."),  # documented limit: no two marks in a row
        ("Mail me @ home.", "Mail me at home."),
        ("#1 priority.", "Number one priority."),
        ("About ~5 hours.", "About about five hours."),
        (
            "Half a 1/2 tablet, 3/4 of it, 2/3 done.",
            "Half a one half tablet, three quarters of it, two thirds done.",
        ),
        ("Open 24/7.", "Open twenty four seven."),
        ("COVID-19, MP3 and 3D.", "COVID nineteen, MP three and three D."),
        ("Rock * roll | x ^ y \\ z", "Rock roll x y z"),
        ("", ""),
        ("   ", ""),
        ("...", ""),
    ],
)
def test_symbols_and_punctuation(written: str, expected: str) -> None:
    assert spoken(written) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("On 2026-12-06 we met.", "On December sixth, twenty twenty six we met."),
        ("On December 6, 2026, we met.", "On December sixth, twenty twenty six, we met."),
        ("In May 2026.", "In May twenty twenty six."),
    ],
)
def test_dates(written: str, expected: str) -> None:
    assert spoken(written) == expected


def test_sentence_starts_are_capitalised() -> None:
    assert spoken("It works. 5 more came.") == "It works. Five more came."
    assert spoken("$5 is enough.") == "Five dollars is enough."
    assert spoken('"50% off," she said.') == "Fifty percent off, she said."
    assert spoken("It is 1.5 now.") == "It is one point five now."


def test_text_already_in_the_style_is_unchanged() -> None:
    for text in (
        "The patient was started on linezolid two hundred and fifty milligrams twice daily.",
        "Revenue from CaelMira grew twenty two percent this quarter.",
        "Thank you, Anna Kowalczyk, and good afternoon everyone.",
        "Isn't it a well-known fact? Yes!",
    ):
        assert spoken(text) == text


def test_random_input_always_gives_the_allowed_style() -> None:
    """Fuzz: any mix of digits, symbols, marks and letters comes out in ``[A-Za-z ,.?!'-]``, with no space
    before a mark, no double spaces and no run of marks."""
    rng = random.Random(0)
    alphabet = "abcXYZ 0123456789 ,.;:!?'\"-–—$€£¥%&@#~+=/()[]°µ…’é\t\n"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        out = spoken(text)
        assert "  " not in out and not re.search(r" [,.?!]", out), (text, out)
        assert not re.search(r"[,?!][,.?!]|\.[,?!]|\.\.", out), (text, out)
        assert out == out.strip()
