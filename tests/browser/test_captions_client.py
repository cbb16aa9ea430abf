"""The protocol client against a scripted in-page socket: held audio, replay de-duplication on resume,
lag estimated from finals, and stop. Runs without the service."""

from __future__ import annotations

import pytest

from tests.browser.static_site import serve_frontend

pytestmark = pytest.mark.browser
ORIGIN = "http://client.localhost"
TICKET = {"ticket": "t", "expires_in_s": 60, "meeting": {"id": 1}}

SCENARIO = """(async () => {
  const sockets = [];
  class FakeSocket {
    static CONNECTING = 0; static OPEN = 1; static CLOSING = 2; static CLOSED = 3;
    constructor(url, protocols) {
      Object.assign(this, { url, protocols, sent: [], readyState: 0, protocol: '', bufferedAmount: 0 });
      sockets.push(this);
    }
    send(data) { this.sent.push(typeof data === 'string' ? JSON.parse(data) : data.byteLength); }
    close(code) { this.readyState = 3; }
    open() { this.readyState = 1; this.protocol = 'captions.v1'; this.onopen(); }
    say(message) { this.onmessage({ data: JSON.stringify(message) }); }
    drop(code) { this.readyState = 3; this.onclose({ code, reason: '' }); }
  }
  window.WebSocket = FakeSocket;
  const { CaptionsClient } = await import('/static/js/captions-client.js');
  const wait = async (predicate) => {
    for (let i = 0; i < 200 && !predicate(); i++) await new Promise((r) => setTimeout(r, 10));
    if (!predicate()) throw new Error('timed out: ' + predicate);
  };
  const chunk = () => new ArrayBuffer(8960 * 2);
  const client = new CaptionsClient({ meetingId: 1, chunkS: 0.56, backoff: { initialMs: 10, maxMs: 20 } });
  const seen = { states: [], finals: [], lags: [] };
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

  first.drop(1012);                                       // the server restarts
  await wait(() => sockets.length === 2);
  const second = sockets[1];
  second.open();
  seen.resumeStart = second.sent[0];
  second.say({ type: 'ready', session_id: 's', resume_token: 'r2', chunk_s: 0.56, chunk_samples: 8960 });
  second.say({ type: 'final', seq: 2, text: 'b', start_s: 1.12, end_s: 1.68 });   // replayed: already shown
  second.say({ type: 'final', seq: 3, text: 'c', start_s: 1.68, end_s: 2.24 });
  const stopped = client.stop();
  await wait(() => second.sent.some((m) => m.type === 'stop'));
  second.say({ type: 'stopped' });
  await stopped;
  return seen;
})()"""


def test_client_holds_audio_resumes_without_duplicates_and_stops(page: object) -> None:
    serve_frontend(page, ORIGIN, {"/api/meetings/1/ticket": TICKET})
    page.goto(f"{ORIGIN}/blank")
    seen = page.evaluate(SCENARIO)
    assert seen["protocols"] == ["captions.v1", "ticket.t"]
    assert seen["firstSent"] == [{"type": "start", "chunk_s": 0.56}, 17920, 17920, 17920, 17920]
    assert seen["resumeStart"] == {"type": "start", "chunk_s": 0.56, "resume_token": "r1", "last_seq": 2}
    assert seen["finals"] == [1, 2, 3]
    assert seen["lags"] == [0, 0, 0.56]  # partial, then finals: 2.24 s sent, 1.68 s decoded
    resumed = ["reconnecting", "connecting", "live"]
    assert seen["states"] == ["connecting", "live", *resumed, "stopping", "stopped"]
