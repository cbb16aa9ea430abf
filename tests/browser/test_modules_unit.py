"""Fast checks of the pages' pure modules, loaded in Chromium (no service): export formats, the caption
view's highlighting and no-shrink rule, reconnect backoff, and the worklet's low-pass resampler."""

from __future__ import annotations

import re

import pytest

from tests.browser.static_site import serve_frontend

pytestmark = pytest.mark.browser
ORIGIN = "http://frontend.localhost"  # *.localhost is a secure context (AudioWorklet needs one)

FINALS = [
    {"seq": 2, "text": "Then  Dr. Okafor <presents>", "start_s": 3.2, "end_s": 5.0, "session_id": "a"},
    {"seq": 1, "text": "Good morning, iPhone & McDonald", "start_s": 0.5, "end_s": 3.4, "session_id": "a"},
    {"seq": 2, "text": "duplicate of seq 2", "start_s": 3.2, "end_s": 5.0, "session_id": "a"},
    {"seq": 3, "text": "   ", "start_s": 5.0, "end_s": 5.5, "session_id": "a"},
    {"seq": 4, "text": "Zero length cue", "start_s": 6.0, "end_s": 6.0, "session_id": "a"},
    {
        "seq": 1,
        "text": "After a restart the clock began again",
        "start_s": 0.2,
        "end_s": 1.0,
        "session_id": "b",
    },
]
VTT_TIME = r"\d{2}:\d{2}:\d{2}\.\d{3}"
SRT_TIME = r"\d{2}:\d{2}:\d{2},\d{3}"


@pytest.fixture
def modules(page: object) -> object:
    serve_frontend(page, ORIGIN)
    page.goto(f"{ORIGIN}/blank")
    return page


def call(page: object, module: str, expression: str, arg: object = None) -> object:
    """Evaluate ``expression`` (using ``m``, the imported module, and ``arg``) in the page."""
    script = f"async (arg) => {{ const m = await import('/static/js/{module}'); return {expression}; }}"
    return page.evaluate(script, arg)


def to_ms(stamp: str) -> int:
    hours, minutes, rest = stamp.replace(",", ".").split(":")
    seconds, millis = rest.split(".")
    return ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 1000 + int(millis)


def test_format_timestamp(modules: object) -> None:
    assert call(modules, "export.js", "[0, 1, 59999, 3600000 + 61001].map((x) => m.formatTimestamp(x))") == [
        "00:00:00.000",
        "00:00:00.001",
        "00:00:59.999",
        "01:01:01.001",
    ]
    assert call(modules, "export.js", "m.formatTimestamp(83456, ',')") == "00:01:23,456"


def test_webvtt_is_numbered_monotonic_escaped_and_keeps_casing(modules: object) -> None:
    vtt = call(modules, "export.js", "m.toWebVTT(arg, {title: 'Ward round'})", FINALS)
    assert vtt.startswith("WEBVTT - Ward round\n\n")
    blocks = vtt.strip().split("\n\n")[1:]
    assert [b.split("\n")[0] for b in blocks] == ["1", "2", "3", "4"]
    times = [re.fullmatch(rf"({VTT_TIME}) --> ({VTT_TIME})", b.split("\n")[1]).groups() for b in blocks]
    spans = [(to_ms(a), to_ms(b)) for a, b in times]
    assert all(start < end for start, end in spans)
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1)), spans
    texts = [b.split("\n", 2)[2] for b in blocks]
    assert texts == [
        "Good morning, iPhone &amp; McDonald",
        "Then Dr. Okafor &lt;presents&gt;",
        "Zero length cue",
        "After a restart the clock began again",
    ]
    assert spans[3][0] >= spans[2][1]  # session b's clock restart is shifted after session a


def test_srt_and_text(modules: object) -> None:
    srt = call(modules, "export.js", "m.toSRT(arg)", FINALS)
    blocks = srt.strip().split("\r\n\r\n")
    assert [b.split("\r\n")[0] for b in blocks] == ["1", "2", "3", "4"]
    for block in blocks:
        assert re.fullmatch(rf"{SRT_TIME} --> {SRT_TIME}", block.split("\r\n")[1])
    assert blocks[1].split("\r\n")[2] == "Then Dr. Okafor <presents>"
    text = call(modules, "export.js", "m.toPlainText(arg)", FINALS)
    assert text.splitlines()[0] == "Good morning, iPhone & McDonald"
    assert len(text.splitlines()) == 4
    assert call(modules, "export.js", "[m.toSRT([]), m.toPlainText([]), m.toWebVTT([])]") == [
        "",
        "",
        "WEBVTT\n",
    ]


def test_export_filename(modules: object) -> None:
    name = call(
        modules, "export.js", "m.exportFilename('Ward round: Cardiology / Ünit 4', 'vtt', new Date(0))"
    )
    assert name == "ward-round-cardiology-unit-4-1970-01-01.vtt"


def test_highlight_marks_whole_words_case_insensitively(modules: object) -> None:
    html = call(
        modules,
        "caption-view.js",
        "(() => { const p = document.createElement('p');"
        " p.append(...m.highlightTerms(arg.text, arg.terms)); return p.innerHTML; })()",
        {
            "text": "Linezolid, not linezolidX; give LINEZOLID <b>",
            "terms": ["linezolid", {"display": "Give"}],
        },
    )
    assert (
        html == '<mark class="term">Linezolid</mark>, not linezolidX; <mark class="term">give</mark> '
        '<mark class="term">LINEZOLID</mark> &lt;b&gt;'
    )


def test_partial_never_shrinks_within_an_utterance(modules: object) -> None:
    shown = call(
        modules,
        "caption-view.js",
        """(async () => {
          const log = document.createElement('div'); document.body.append(log);
          const view = new m.CaptionView({ log });
          const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
          const seen = [];
          for (const [text, utt] of [['the lin', 0], ['the linezolid', 0], ['the line', 0], ['new', 1]]) {
            view.setPartial(text, utt); await frame(); seen.push(log.querySelector('.partial').textContent);
          }
          view.addFinal({ seq: 1, text: 'new words', start_s: 0, end_s: 1, matched_terms: [] });
          await frame();
          seen.push(log.querySelector('.partial').textContent, log.querySelectorAll('.line').length);
          return seen;
        })()""",
    )
    assert shown == ["the lin", "the linezolid", "the linezolid", "new", "", 1]


def test_backoff_grows_exponentially_and_is_capped(modules: object) -> None:
    delays = call(
        modules,
        "captions-client.js",
        "[1, 2, 3, 4, 10].map((n) => m.backoffDelayMs(n, { initialMs: 500, maxMs: 15000 }, () => 0.5))",
    )
    assert delays == [500, 1000, 2000, 4000, 15000]


RESAMPLE = """(async (arg) => {
  const rate = arg.rate, seconds = 1.5, chunkSamples = 8960;
  const ctx = new OfflineAudioContext(1, Math.round(rate * seconds), rate);
  // Worklet fetches bypass Playwright's routing: load the (import-free) module from a blob instead.
  const source = await (await fetch('/static/js/pcm-worklet.js')).text();
  await ctx.audioWorklet.addModule(URL.createObjectURL(new Blob([source], { type: 'text/javascript' })));
  const node = new AudioWorkletNode(ctx, 'pcm-chunker', { processorOptions: { chunkSamples } });
  const chunks = [];
  node.port.onmessage = (e) => { if (e.data.type === 'chunk') chunks.push(e.data.buffer); };
  const osc = new OscillatorNode(ctx, { frequency: arg.frequency });
  const gain = new GainNode(ctx, { gain: 0.5 });
  osc.connect(gain).connect(node).connect(ctx.destination);
  osc.start();
  await ctx.startRendering();
  await new Promise((r) => setTimeout(r, 200));
  const sizes = chunks.map((b) => b.byteLength);
  const view = new DataView(chunks[0]);
  let sum = 0; const skip = 200;
  for (let i = skip; i < chunkSamples; i++) { const s = view.getInt16(i * 2, true) / 32768; sum += s * s; }
  return { sizes, rms: Math.sqrt(sum / (chunkSamples - skip)) };
})"""


@pytest.mark.parametrize("rate", [48000, 44100])
def test_worklet_resampler_keeps_speech_band_and_removes_aliases(modules: object, rate: int) -> None:
    """A 1 kHz tone passes at full level; a 12 kHz tone (which plain decimation folds to 4 kHz) is gone."""
    passband = modules.evaluate(RESAMPLE, {"rate": rate, "frequency": 1000})
    alias = modules.evaluate(RESAMPLE, {"rate": rate, "frequency": 12000})
    assert set(passband["sizes"]) == {8960 * 2}, passband["sizes"]
    assert len(passband["sizes"]) == 2  # 1.5 s at 16 kHz = 24,000 samples: two whole chunks
    assert passband["rms"] == pytest.approx(0.5 / 2**0.5, rel=0.03)
    assert alias["rms"] < 0.5 / 2**0.5 * 10 ** (-50 / 20), alias["rms"]


VIEW = """(async () => {
  const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const log = document.createElement('div');
  log.style.cssText = 'height: 100px; overflow-y: auto; font-size: 20px';
  const announcer = document.createElement('div');
  const jump = document.createElement('button');
  document.body.append(log, announcer, jump);
  const speak = (text) => { announcer.textContent = text; };
  const view = new m.CaptionView({ log, speak, jumpButton: jump });
  const add = async (n) => {
    for (let i = 0; i < n; i++) {
      const seq = view.finals.length + 1;
      view.addFinal({ seq, text: `line ${seq}`, start_s: 0, end_s: 1 });
    }
    await frame();
  };
  const atBottom = () => log.scrollHeight - log.scrollTop - log.clientHeight < 2;
  const out = {};
  await add(10);
  out.followsAtFirst = atBottom();
  out.silentByDefault = announcer.textContent;
  log.scrollTop = 0; log.dispatchEvent(new Event('scroll')); await frame();
  await add(3);
  out.stayedWhereTheReaderIs = log.scrollTop === 0;
  out.jumpShown = !jump.hidden;
  jump.click(); await frame();
  out.backAtBottom = atBottom() && jump.hidden;
  view.announce = true;
  view.setPartial('a partial is never announced', 9); await frame();
  out.afterPartial = announcer.textContent;
  await add(1);
  out.afterFinal = announcer.textContent;
  return out;
})()"""


def test_view_follows_until_the_reader_scrolls_up_and_announces_finals_only(modules: object) -> None:
    out = call(modules, "caption-view.js", VIEW)
    assert out == {
        "followsAtFirst": True,
        "silentByDefault": "",
        "stayedWhereTheReaderIs": True,
        "jumpShown": True,
        "backAtBottom": True,
        "afterPartial": "",
        "afterFinal": "line 14",
    }


def test_caption_lines_show_written_numbers_when_chosen(modules: object) -> None:
    """The captions page and the meeting view write numbers out only when "Written numbers" is on (their
    default is off, like the meeting export's), never touching a matched vocabulary term."""
    final = {
        "text": "give six hundred milligrams of two twice daily",
        "matched_terms": ["two"],
        "seq": 1,
        "start_s": 0,
        "end_s": 2,
        "session_id": "s",
        "user_id": 1,
        "speaker": "Dr Grey",
        "meeting_start_s": 3,
        "meeting_end_s": 5,
    }
    line = "((on) => m.{cls}.prototype.finalLine.call({{ written: on }}, arg){pick}.textContent)"
    for module, cls, pick in (
        ("caption-view.js", "CaptionView", ""),
        ("meeting-log.js", "MeetingLog", ".querySelector('.text')"),
    ):
        written = call(modules, module, line.format(cls=cls, pick=pick) + "(true)", final)
        spoken = call(modules, module, line.format(cls=cls, pick=pick) + "(false)", final)
        assert (written, spoken) == ("give 600 mg of two twice daily", final["text"])
    prefs = call(
        modules,
        "display-prefs.js",
        "[m.writtenNumbersPreferred(), "
        "m.writtenNumbersPreferred(m.MEETING_WRITTEN.key, m.MEETING_WRITTEN.fallback)]",
    )
    assert prefs == [True, False]
