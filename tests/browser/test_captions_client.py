"""The protocol client against a scripted in-page socket: held audio, sending audio again from where the
server's stored captions end after a resume, replay de-duplication, lag estimated from finals, and stop.
Runs without the service."""

from __future__ import annotations

import pytest

from tests.browser.static_site import serve_frontend

pytestmark = pytest.mark.browser
ORIGIN = "http://client.localhost"
TICKET = {"ticket": "t", "expires_in_s": 60, "meeting": {"id": 1}}

# A scripted in-page WebSocket (chunks recorded as [bytes, first sample]), the client module, and wait().
PRELUDE = """
  const sockets = [];
  class FakeSocket {
    static CONNECTING = 0; static OPEN = 1; static CLOSING = 2; static CLOSED = 3;
    constructor(url, protocols) {
      Object.assign(this, { url, protocols, sent: [], readyState: 0, protocol: '', bufferedAmount: 0 });
      sockets.push(this);
    }
    send(data) {  // a chunk is recorded as [bytes, its first sample]
      const chunk = () => [data.byteLength, new Int16Array(data)[0]];
      this.sent.push(typeof data === 'string' ? JSON.parse(data) : chunk());
    }
    close(code) { this.readyState = 3; }
    open() { this.readyState = 1; this.protocol = 'captions.v1'; this.onopen(); }
    say(message) { this.onmessage({ data: JSON.stringify(message) }); }
    drop(code) { this.readyState = 3; this.onclose({ code, reason: '' }); }
  }
  window.WebSocket = FakeSocket;
  const { CaptionsClient } = await import('/static/js/captions-client.js');
  const wait = async (predicate) => {
    for (let i = 0; i < 300 && !predicate(); i++) await new Promise((r) => setTimeout(r, 10));
    if (!predicate()) throw new Error('timed out: ' + predicate);
  };
"""

SCENARIO = (
    "(async () => {"
    + PRELUDE
    + """
  let spoken = 0;
  const chunk = () => new Int16Array(8960).fill(++spoken).buffer;  // chunk k (from 1) holds k
  const client = new CaptionsClient({ meetingId: 1, chunkS: 0.56, backoff: { initialMs: 10, maxMs: 20 } });
  const seen = { states: [], finals: [], lags: [], gaps: [] };
  client.addEventListener('gap', (e) => {
    seen.gaps.push([e.detail.from_s, e.detail.to_s, e.detail.resumedAt >= e.detail.lostAt]);
  });
  client.addEventListener('state', (e) => seen.states.push(e.detail.state));
  client.addEventListener('final', (e) => seen.finals.push(e.detail.seq));
  client.addEventListener('lag', (e) => seen.lags.push(Math.round(e.detail.lag_s * 100) / 100));

  client.connect();
  client.sendAudio(chunk()); client.sendAudio(chunk());   // captured before the socket is ready: held
  await wait(() => sockets.length === 1);
  const first = sockets[0];
  seen.protocols = first.protocols;
  first.open();
  first.say({ type: 'ready', session_id: 's', resume_token: 'r1', chunk_s: 0.56, chunk_samples: 8960 });
  first.say({ type: 'partial', text: 'a', utterance: 0, audio_s: 1.12, lag_s: 0 });
  first.say({ type: 'final', seq: 1, text: 'a', start_s: 0, end_s: 1.12, audio_s: 1.12 });
  client.sendAudio(chunk()); client.sendAudio(chunk());
  first.say({ type: 'final', seq: 2, text: 'b', start_s: 1.12, end_s: 1.68, audio_s: 1.68 });
  seen.firstSent = first.sent;

  first.drop(1006);                                       // the server was killed
  client.sendAudio(chunk());                              // spoken while it was down: held
  await wait(() => sockets.length === 2);
  const second = sockets[1];
  second.open();
  seen.resumeStart = second.sent[0];
  // The server stored captions up to 1.12 s only (the final ending 1.68 s was lost with it): send again
  second.say({
    type: 'ready', session_id: 's', resume_token: 'r2', chunk_s: 0.56, chunk_samples: 8960,
    resume_from_s: 1.12,
  });
  second.say({ type: 'final', seq: 2, text: 'b', start_s: 1.12, end_s: 1.68 });   // replayed: already shown
  second.say({ type: 'final', seq: 3, text: 'c', start_s: 1.68, end_s: 2.24 });
  seen.secondSent = second.sent.slice(1);
  const stopped = client.stop();
  await wait(() => second.sent.some((m) => m.type === 'stop'));
  second.say({ type: 'stopped' });
  await stopped;
  return seen;
})()"""
)


def test_client_holds_audio_resumes_without_duplicates_and_stops(page: object) -> None:
    serve_frontend(page, ORIGIN, {"/api/meetings/1/ticket": TICKET})
    page.goto(f"{ORIGIN}/blank")
    seen = page.evaluate(SCENARIO)
    assert seen["protocols"] == ["captions.v1", "ticket.t"]
    start = {"type": "start", "chunk_s": 0.56, "audio_s": 1.12, "buffered_from_s": 0}
    assert seen["firstSent"] == [start, [17920, 1], [17920, 2], [17920, 3], [17920, 4]]
    resume = {"resume_token": "r1", "last_seq": 2, "audio_s": 2.8, "buffered_from_s": 0}
    assert seen["resumeStart"] == {"type": "start", "chunk_s": 0.56, **resume}
    assert seen["secondSent"][:3] == [[17920, 3], [17920, 4], [17920, 5]]  # from 1.12 s, then the held one
    assert seen["gaps"] == [[None, None, True]]  # the outage, with no audio left uncaptioned
    assert seen["finals"] == [1, 2, 3]
    assert seen["lags"] == [0, 0, 0.56]  # partial, then finals: 2.24 s sent, 1.68 s decoded
    resumed = ["reconnecting", "connecting", "live"]
    assert seen["states"] == ["connecting", "live", *resumed, "stopping", "stopped"]


RING = """(async () => {
  const { AudioRing } = await import('/static/js/audio-ring.js');
  const ring = new AudioRing(10);
  const piece = (from, n) => Int16Array.from({ length: n }, (_, i) => from + i);
  const out = {};
  ring.push(piece(0, 4)); ring.push(piece(4, 4));
  out.first = Array.from(ring.take(3));                  // 0 1 2
  ring.push(piece(8, 4));                                // 12 held > 10: the first piece (0-3) goes
  out.held = [ring.start, ring.end, ring.cursor, ring.lostSamples];   // 3 was never sent
  ring.seek(6); out.again = Array.from(ring.take(5));   // 6..10 across two pieces
  out.short = ring.take(2);                              // one left: null
  ring.seek(0); out.clamped = ring.cursor;               // not before the oldest held
  ring.rebase(9); out.rebased = [ring.start, ring.end, ring.cursor, Array.from(ring.take(3))];
  return out;
})()"""


def test_audio_ring_keeps_recent_audio_and_counts_what_it_loses(page: object) -> None:
    serve_frontend(page, ORIGIN, {})
    page.goto(f"{ORIGIN}/blank")
    out = page.evaluate(RING)
    assert out["first"] == [0, 1, 2]
    assert out["held"] == [4, 12, 4, 1]
    assert out["again"] == [6, 7, 8, 9, 10]
    assert out["short"] is None
    assert out["clamped"] == 4
    assert out["rebased"] == [0, 3, 0, [9, 10, 11]]


CONFLICT = (
    "(async () => {"
    + PRELUDE
    + """
  const client = new CaptionsClient({ meetingId: 1, chunkS: 0.56, backoff: { initialMs: 10, maxMs: 20 } });
  const seen = { notices: [], states: [] };
  client.addEventListener('notice', (e) => seen.notices.push(e.detail.code || e.detail.text));
  client.addEventListener('state', (e) => seen.states.push([e.detail.state, e.detail.delayMs ?? null]));
  client.connect();
  await wait(() => sockets.length === 1);
  sockets[0].open();
  sockets[0].say({ type: 'ready', session_id: 's', resume_token: 'r1', chunk_s: 0.56, chunk_samples: 8960 });
  sockets[0].drop(1006);
  await wait(() => sockets.length === 2);
  sockets[1].open();
  sockets[1].say({ type: 'error', code: 'resume_conflict', message: 'another connection is resuming' });
  sockets[1].drop(1013);
  await wait(() => sockets.length === 3);
  sockets[2].open();
  seen.third = sockets[2].sent[0];
  return seen;
})()"""
)


def test_a_resume_conflict_is_retried_quietly_with_the_same_session(page: object) -> None:
    serve_frontend(page, ORIGIN, {"/api/meetings/1/ticket": TICKET})
    page.goto(f"{ORIGIN}/blank")
    seen = page.evaluate(CONFLICT)
    assert seen["notices"] == []  # no error banner: the page simply resumes again
    assert seen["third"]["resume_token"] == "r1"
    delays = [delay for state, delay in seen["states"] if state == "reconnecting"]
    assert len(delays) == 2 and delays[1] < 5000  # the ordinary backoff, not the 5 s "busy" wait
