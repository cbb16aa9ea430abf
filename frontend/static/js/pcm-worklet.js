// AudioWorklet: microphone -> 16 kHz mono PCM16 little-endian, cut into chunks of exactly `chunkSamples`.
// Resampling is a windowed-sinc FIR low-pass evaluated at fractional positions (any input rate), so
// energy above 8 kHz is removed before decimation instead of aliasing into the speech band.
// Messages out: {type: "chunk", buffer: ArrayBuffer} (transferred), {type: "level", rms, peak}.
// Messages in: {type: "flush"} -> pads and posts the last partial chunk, then {type: "flushed"}.

const OUT_RATE = 16000;
const ZERO_CROSSINGS = 16; // per side, in output-rate periods: ~70 dB stop band with the Blackman window
const TABLE_RESOLUTION = 128; // kernel samples per input sample (linear interpolation between them)
const PASSBAND_FRACTION = 0.9; // cut-off at 0.9 x 8 kHz leaves room for the transition band
const LEVEL_INTERVAL_S = 0.05;

/** Streaming fractional-rate resampler; `push` returns the output samples it could complete. */
class SincResampler {
  constructor(inRate, outRate) {
    this.step = inRate / outRate; // input samples per output sample
    this.cutoff = Math.min(1, outRate / inRate) * PASSBAND_FRACTION; // fraction of input Nyquist
    this.halfWidth = Math.ceil(ZERO_CROSSINGS / this.cutoff); // input samples either side
    this.table = this.buildKernel();
    this.buffer = new Float32Array(this.halfWidth * 2 + 8192);
    this.length = this.halfWidth; // leading zeros: history before the first sample
    this.position = this.halfWidth; // next output position, in buffer sample coordinates
  }

  buildKernel() {
    const size = this.halfWidth * TABLE_RESOLUTION + 2;
    const table = new Float32Array(size);
    for (let i = 0; i < size; i++) {
      const x = i / TABLE_RESOLUTION; // distance from the centre, input samples
      if (x > this.halfWidth) break;
      const arg = Math.PI * this.cutoff * x;
      const sinc = x === 0 ? 1 : Math.sin(arg) / arg;
      const w = 0.5 + (0.5 * x) / this.halfWidth; // Blackman window, folded to the right half
      const window = 0.42 - 0.5 * Math.cos(2 * Math.PI * w) + 0.08 * Math.cos(4 * Math.PI * w);
      table[i] = this.cutoff * sinc * window;
    }
    return table;
  }

  kernel(distance) {
    const x = Math.abs(distance) * TABLE_RESOLUTION;
    const i = Math.floor(x);
    const frac = x - i;
    return this.table[i] + (this.table[i + 1] - this.table[i]) * frac;
  }

  ensureRoom(extra) {
    if (this.length + extra <= this.buffer.length) return;
    const grown = new Float32Array((this.length + extra) * 2);
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
  }

  push(input, out) {
    this.ensureRoom(input.length);
    this.buffer.set(input, this.length);
    this.length += input.length;
    const buf = this.buffer;
    const hw = this.halfWidth;
    while (this.position + hw < this.length) {
      const centre = this.position;
      const first = Math.ceil(centre - hw);
      const last = Math.floor(centre + hw);
      let acc = 0;
      for (let i = first; i <= last; i++) acc += buf[i] * this.kernel(centre - i);
      out.push(acc);
      this.position += this.step;
    }
    const drop = Math.floor(this.position - hw) - 1;
    if (drop > 0) {
      buf.copyWithin(0, drop, this.length);
      this.length -= drop;
      this.position -= drop;
    }
  }
}

class PcmChunker extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const opts = (options && options.processorOptions) || {};
    this.chunkSamples = opts.chunkSamples || 8960;
    this.resampler = new SincResampler(sampleRate, OUT_RATE);
    this.scratch = [];
    this.startChunk();
    this.levelEvery = Math.round(sampleRate * LEVEL_INTERVAL_S);
    this.levelCount = 0;
    this.sumSquares = 0;
    this.peak = 0;
    this.mono = new Float32Array(128);
    this.port.onmessage = (event) => this.onMessage(event.data);
  }

  startChunk() {
    this.chunk = new ArrayBuffer(this.chunkSamples * 2);
    this.view = new DataView(this.chunk);
    this.filled = 0;
  }

  onMessage(message) {
    if (message.type === "flush") {
      if (this.filled > 0) this.postChunk(); // the rest of the chunk stays zero: silence
      this.port.postMessage({ type: "flushed" });
    } else if (message.type === "chunk-samples" && message.chunkSamples !== this.chunkSamples) {
      this.chunkSamples = message.chunkSamples;
      this.startChunk();
    }
  }

  postChunk() {
    const buffer = this.chunk;
    this.port.postMessage({ type: "chunk", buffer }, [buffer]);
    this.startChunk();
  }

  process(inputs) {
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true;
    const frames = channels[0].length;
    if (this.mono.length !== frames) this.mono = new Float32Array(frames);
    const mono = this.mono;
    mono.fill(0);
    for (const channel of channels) {
      for (let i = 0; i < frames; i++) mono[i] += channel[i] / channels.length;
    }
    this.meter(mono);
    this.scratch.length = 0;
    this.resampler.push(mono, this.scratch);
    for (const sample of this.scratch) {
      const clamped = Math.max(-1, Math.min(1, sample));
      const int = Math.round(clamped < 0 ? clamped * 0x8000 : clamped * 0x7fff);
      this.view.setInt16(this.filled * 2, int, true); // little-endian on every platform
      this.filled += 1;
      if (this.filled === this.chunkSamples) this.postChunk();
    }
    return true;
  }

  meter(mono) {
    for (let i = 0; i < mono.length; i++) {
      const value = mono[i];
      this.sumSquares += value * value;
      const magnitude = Math.abs(value);
      if (magnitude > this.peak) this.peak = magnitude;
    }
    this.levelCount += mono.length;
    if (this.levelCount >= this.levelEvery) {
      const rms = Math.sqrt(this.sumSquares / this.levelCount);
      this.port.postMessage({ type: "level", rms, peak: this.peak });
      this.levelCount = 0;
      this.sumSquares = 0;
      this.peak = 0;
    }
  }
}

registerProcessor("pcm-chunker", PcmChunker);
