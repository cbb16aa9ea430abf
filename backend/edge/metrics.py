"""Prometheus metrics (served at /metrics). One registry per app so tests can build several apps."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge


@dataclass
class Metrics:
    """The service's metrics; engine figures are sampled into gauges at scrape time."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.sessions = Gauge("captions_sessions", "Live streaming sessions on this replica", registry=r)
        self.finals_persisted = Counter("captions_finals_persisted", "Finals written to the DB", registry=r)
        self.persist_failures = Counter(
            "captions_persist_failures", "Failed attempts to store a final (disk full, DB down)", registry=r
        )
        self.partials_dropped = Counter(
            "captions_partials_dropped", "Partials not sent due to lag", registry=r
        )
        self.input_level_warnings = Counter(
            "captions_input_level_messages",
            "input_level messages sent to speakers (quiet, loud, ok again)",
            ["state"],
            registry=r,
        )
        self.rejected_sessions = Counter(
            "captions_rejected_sessions", "Sessions refused or closed for capacity", ["reason"], registry=r
        )
        self.lag_s = Gauge(
            "captions_max_lag_seconds", "Largest audio received - decoded, seconds", registry=r
        )
        self.batch_streams = Gauge(
            "captions_engine_batch_streams", "Streams in the last decode step", registry=r
        )
        self.step_ms = Gauge("captions_engine_step_ms", "Duration of the last decode step, ms", registry=r)
        self.final_pass_finals = Gauge(
            "captions_final_pass_finals",
            "Finals the second pass handled, by outcome (second: its text kept; else the guard that kept the "
            "first pass's text, or no_speech: dropped)",
            ["outcome"],
            registry=r,
        )
        self.final_pass_ms = Gauge(
            "captions_final_pass_ms", "Second-pass time of the last step that refined finals, ms", registry=r
        )
        self.decoding_ms_per_audio_s = Gauge(
            "captions_engine_decoding_ms_per_audio_second",
            "Decode-thread ms per second of audio decoded since start, by decoding mode (greedy, beam)",
            ["decoding"],
            registry=r,
        )
        self.queue_wait_ms = Gauge(
            "captions_engine_queue_wait_ms", "Chunk wait before its step, ms", registry=r
        )
        self.final_pass_backlog = Gauge(
            "captions_final_pass_backlog", "Steps whose finals wait for the second pass", registry=r
        )
        self.load_rung = Gauge(
            "captions_load_rung",
            "Degradation ladder rung: 0 normal, 1 second pass off, 2 greedy for new sessions, 3 fewer "
            "partials, 4 new sessions refused, 5 newest sessions shed",
            registry=r,
        )
        self.load_rung_changes = Counter(
            "captions_load_rung_changes", "Times the degradation ladder reached a rung", ["rung"], registry=r
        )
        self.engine_ready = Gauge(
            "captions_engine_ready", "1 when the decoder is loaded and alive", registry=r
        )
