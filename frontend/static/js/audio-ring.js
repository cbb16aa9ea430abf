// The last seconds of a session's microphone audio, kept so that after a crash or a dropped connection the
// client can send again what the server never stored captions for (docs/protocol.md, "Resuming").
//
// Samples are numbered on the session's audio clock (sample n is at n / 16000 s). `start` .. `end` is what
// is held; `cursor` is the next sample to send. Capture appends at `end`; the oldest audio is dropped once
// more than `capacity` samples are held, and audio dropped before it was sent is counted in `lostSamples`.

export class AudioRing {
  constructor(capacitySamples) {
    this.capacity = capacitySamples;
    this.pieces = []; // {start, samples: Int16Array}, contiguous and in order
    this.start = 0;
    this.end = 0;
    this.cursor = 0;
    this.lostSamples = 0;
  }

  /** Append captured PCM16 samples (Int16Array) at the end. */
  push(samples) {
    if (!samples.length) return;
    this.pieces.push({ start: this.end, samples });
    this.end += samples.length;
    this.trim();
  }

  trim() {
    while (this.pieces.length > 1 && this.end - this.pieces[0].start > this.capacity) {
      const dropped = this.pieces.shift();
      const droppedEnd = dropped.start + dropped.samples.length;
      if (this.cursor < droppedEnd) this.lostSamples += droppedEnd - Math.max(this.cursor, dropped.start);
      this.start = droppedEnd;
      this.cursor = Math.max(this.cursor, this.start);
    }
  }

  /** Move the send position to `sample`, clamped to what is held. */
  seek(sample) {
    this.cursor = Math.min(this.end, Math.max(this.start, Math.round(sample)));
  }

  /** The next `n` samples from the cursor (advancing it), or null while fewer are held. */
  take(n) {
    if (this.end - this.cursor < n) return null;
    const out = new Int16Array(n);
    let filled = 0;
    for (const piece of this.pieces) {
      const pieceEnd = piece.start + piece.samples.length;
      if (pieceEnd <= this.cursor) continue;
      const from = this.cursor - piece.start;
      const count = Math.min(n - filled, piece.samples.length - from);
      out.set(piece.samples.subarray(from, from + count), filled);
      filled += count;
      this.cursor += count;
      if (filled === n) break;
    }
    return out;
  }

  /** Start a new session's clock at `sample` (clamped): earlier audio is dropped, `sample` becomes 0. */
  rebase(sample) {
    const at = Math.min(this.end, Math.max(this.start, Math.round(sample)));
    const pieces = [];
    for (const piece of this.pieces) {
      const pieceEnd = piece.start + piece.samples.length;
      if (pieceEnd <= at) continue;
      const from = Math.max(0, at - piece.start);
      pieces.push({ start: piece.start + from - at, samples: piece.samples.subarray(from) });
    }
    this.pieces = pieces;
    this.end -= at;
    this.start = 0;
    this.cursor = 0;
  }
}
