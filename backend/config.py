"""Service settings: every limit is a typed setting with units in its name, read from ``CAPTIONS_*``."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from backend.engine.types import EngineConfig

from captions_model.paths import BUNDLED_MODEL_PATH, REPO_ROOT, resolve_final_pass, resolve_lm

__all__ = ["REPO_ROOT", "Settings", "engine_config", "get_settings", "lm_path"]


class Settings(BaseSettings):
    """Validated at start-up; an invalid value stops the service with a message naming the variable."""

    model_config = SettingsConfigDict(env_prefix="CAPTIONS_", env_file=None, extra="ignore")

    host: str = Field("127.0.0.1", description="Address uvicorn listens on.")
    port: int = Field(8000, ge=1, le=65535, description="TCP port uvicorn listens on.")
    database_url: str = Field(
        f"sqlite+aiosqlite:///{REPO_ROOT / 'data' / 'captions.db'}",
        description="SQLAlchemy async URL: sqlite+aiosqlite:///path or postgresql+asyncpg://user:pw@host/db.",
    )
    model: str = Field(
        str(BUNDLED_MODEL_PATH),
        description="NeMo Transducer to load: a .nemo path or a pretrained model name.",
    )
    lm: str = Field(
        "auto",
        description="Token n-gram LM fused into beam search: a .nemo/ARPA path over the model's vocabulary, "
        "'none', or 'auto' (the bundled LM with the bundled model, none otherwise).",
    )
    lm_alpha: float = Field(
        0.7,
        ge=0,
        le=5,
        description="Weight of the n-gram LM in beam search (0.7: level with the best weight on synthetic "
        "test speech, fewer dropped words on real speech; models/MODEL_CARD.md).",
    )
    lm_token_bonus: float = Field(
        1.0,
        ge=0,
        le=10,
        description="Score added to every emitted token in beam search with the LM, against the LM's "
        "tendency to drop words (1.0: real speech 29.8 -> 23.7 % WER on the bundled model, synthetic sets "
        "level or better; 0: NeMo's fusion; models/MODEL_CARD.md).",
    )
    final_pass: Literal["auto", "off", "decode"] = Field(
        "auto",
        description="Second pass for finals: 'decode' (Whisper's own decoder re-reads each finished "
        "utterance, boosted by the meeting's vocabulary; docs/architecture.md), 'off' (the streaming pass's "
        "finals), or 'auto' (decode with the bundled model, off with any other model).",
    )
    final_pass_model: str | None = Field(
        None, description="The second pass's model file (default: models/captions-final-pass.pt)."
    )
    final_pass_beam_size: int = Field(4, ge=1, le=16, description="Beams of the second pass.")
    final_pass_alpha: float = Field(
        1.5, ge=0, le=10, description="Weight of the meeting's vocabulary in the second pass."
    )
    final_pass_term_deficit: float | None = Field(
        30.0,
        ge=0,
        description="Evidence for a term before a final shows it: the second pass keeps a vocabulary term "
        "only where Whisper scores the text with it at most this many nats below the text with what it reads "
        "there without the vocabulary (30: on the dev sets no false term with 54 names, 0.8 per 1,000 words "
        "with 200, for 2.7 recall points of the keyword set; unset: terms are not checked; docs/eval.md).",
    )
    final_pass_arbitration: Literal["agreement", "confidence", "scored"] = Field(
        "scored",
        description="Where the second pass's reading disagrees with the first pass's (word error rate "
        "> 60 %, or a run of 5 first-pass words it has nothing for): 'scored' takes Whisper's where Whisper, "
        "scoring both texts on the audio, finds its own likelier by 0.5 nats per token (1.0 with words "
        "skipped; degraded real speech: reverb 42.4 -> 14.0 %, babble 70.8 -> 35.8 %, clean 7.8 -> 6.2 %); "
        "'confidence' where Whisper's own mean log-probability per token is >= -0.5; 'agreement' keeps the "
        "first pass's text. Whisper's loops, no-speech and unsure readings never replace it (docs/eval.md).",
    )
    final_pass_refine_partials_s: float = Field(
        1.5,
        ge=0,
        description="Live refinement: while an utterance is still open and 2 s long or more, the second pass "
        "re-reads it this often (seconds) and the partial on screen shows its reading, the streaming pass's "
        "newer words after it (real speech, partials: clean 24.3 -> 13.6 % WER; docs/eval.md), only "
        "while the second pass is idle. 0: the partial is the streaming pass's alone. Given up under load.",
    )
    device: str = Field("cpu", description="torch device for the decoder: cpu, cuda or cuda:N.")
    torch_threads: int = Field(1, ge=1, le=64, description="torch intra-op threads of the decode worker.")
    cache_dir: Path = Field(REPO_ROOT / "var" / "cache", description="Compiled vocabulary graphs on disk.")
    log_level: str = Field("info", description="Log level: debug, info, warning, error.")
    trusted_proxies: str = Field(
        "",
        description="Comma-separated addresses or networks (CIDR) of the reverse proxies whose "
        "X-Forwarded-For and X-Forwarded-Proto the service believes, e.g. the nginx container's address. "
        "Empty (default): none; a client's address is the TCP peer, so login limits cannot be dodged by "
        "sending the header.",
    )
    allowed_origins: list[str] = Field(
        default_factory=lambda: ["http://127.0.0.1:8000", "http://localhost:8000"],
        description="Exact scheme://host:port origins allowed to open a WebSocket.",
    )
    allowed_chunk_s: list[float] = Field(
        default_factory=lambda: [0.56, 1.12], description="Chunk durations a client may choose, seconds."
    )
    max_ws_message_bytes: int = Field(65536, ge=1024, description="Largest WebSocket frame accepted, bytes.")
    data_dir: Path = Field(REPO_ROOT / "data", description="Where the service keeps its own files.")
    secret_key: str | None = Field(
        None, description="Signs cookies. Unset: a random key is kept in data_dir (set it for replicas)."
    )
    admin_username: str = Field("admin", description="Admin account created when no user exists.")
    admin_password: str | None = Field(
        None, description="Its password. Unset: a random one is written to data_dir/admin-password.txt."
    )
    cookie_secure: bool = Field(False, description="Mark cookies Secure (set behind TLS).")
    session_max_age_s: int = Field(12 * 3600, ge=60, description="Cookie session lifetime, seconds.")
    api_token_ttl_days: int = Field(
        90,
        ge=1,
        le=365,
        description="Lifetime of a new API token when its creator names none, days (a creator may ask for "
        "1-365).",
    )
    login_max_failures: int = Field(
        5,
        ge=1,
        description="Failed logins for one username from one client address (or one browser with the user's "
        "device cookie) within login_window_s before that pair is blocked; other addresses are not.",
    )
    login_max_failures_per_user: int = Field(
        100,
        ge=1,
        description="Failed logins for one username from all addresses without the user's device cookie "
        "within login_window_s before new browsers are blocked for it (guessing from many addresses); a "
        "browser that logged in as the user before keeps working.",
    )
    login_device_days: int = Field(
        180,
        ge=1,
        le=730,
        description="How long a browser is remembered after a successful login (the device cookie that lets "
        "it in while its user is locked out elsewhere), days.",
    )
    login_max_failures_per_client: int = Field(
        20,
        ge=1,
        description="Login attempts that failed from one client address (any usernames, unknown ones too) "
        "within login_window_s before it is blocked; several people may share an address.",
    )
    password_hash_threads: int = Field(
        2, ge=1, le=16, description="Threads that hash and check passwords (argon2), off the event loop."
    )
    password_hash_queue: int = Field(
        16, ge=1, description="Password checks that may wait for a hashing thread; beyond, logins get 503."
    )
    persist_attempts: int = Field(
        3,
        ge=1,
        le=10,
        description="Tries to store a caption (backoff 0.25 s, doubling) before the session "
        "tells its client to resume later.",
    )
    persist_not_ready_s: float = Field(
        30.0, gt=0, description="How long a failed caption write keeps /readyz false, unless one succeeds, s."
    )
    persist_probe_interval_s: float = Field(
        1.0,
        gt=0,
        description="While a failed caption write keeps the replica not ready, how often the write is tried "
        "again (not kept) so a freed disk is noticed at once, s.",
    )
    max_json_depth: int = Field(
        32, ge=4, le=256, description="Deepest nesting of arrays and objects accepted in client JSON."
    )
    max_body_bytes: int = Field(
        65536,
        ge=1024,
        description="Largest request body of a route not named below, bytes; a larger one is refused with "
        "413 while it is read (a declared Content-Length at once, a chunked body as it arrives).",
    )
    max_anonymous_body_bytes: int = Field(
        8192,
        ge=1024,
        description="Largest request body of the routes that need no login (login, invite check and accept, "
        "opening a viewer link), bytes.",
    )
    max_upload_body_bytes: int = Field(
        8 * 1024 * 1024,
        ge=65536,
        description="Largest request body of a vocabulary's bulk term list or import, bytes (dictation notes "
        "have their own cap: 100,000 characters).",
    )
    max_recording_bytes: int = Field(
        100 * 1024 * 1024,
        ge=65536,
        description="Largest uploaded recording (POST /v1/audio/transcriptions, a meeting's recordings), "
        "bytes: a larger body is refused with 413 while it arrives, never held whole.",
    )
    max_recording_s: float = Field(
        4 * 3600.0,
        gt=0,
        description="Longest uploaded recording, seconds of audio: decoding stops there and the upload is "
        "refused with 413.",
    )
    login_window_s: float = Field(300.0, gt=0, description="Window of the login failure limit, seconds.")
    token_check_s: float = Field(
        5.0,
        gt=0,
        description="How often each replica checks that the API tokens behind its open sockets still work "
        "(revoked elsewhere or expired: their sockets end), s. Revoked here: at once.",
    )
    ticket_ttl_s: int = Field(60, ge=5, le=60, description="WebSocket ticket lifetime, seconds (<= 60).")
    resume_ttl_s: int = Field(900, ge=10, description="How long a session can be resumed, seconds.")
    max_sessions: int = Field(64, ge=1, description="Live streaming sessions on this replica (capacity cap).")
    max_sessions_per_user: int = Field(4, ge=1, description="Live streaming sessions per user.")
    max_viewers: int = Field(
        1000, ge=1, description="Meeting-view sockets (/ws/view) on this replica; beyond, a typed close 1013."
    )
    max_viewers_per_link: int = Field(
        250, ge=1, description="Meeting-view sockets opened with one view-only link, on this replica."
    )
    max_viewers_per_client: int = Field(
        50,
        ge=1,
        description="Meeting-view sockets from one client address on this replica (an office or a NAT may "
        "share one).",
    )
    max_draft_chars_per_user: int = Field(
        1_000_000,
        ge=100_000,
        description="Characters of dictation notes one user may keep on the server, all notes together (ten "
        "full notes of 100,000); a save beyond it is refused with 413 quota_exceeded.",
    )
    admins_read_content: bool = Field(
        True,
        description="Whether an admin may read (and export, edit, open) the content of a meeting or "
        "dictation they neither organise nor belong to. Every such read is recorded in the access audit "
        "and shown to the organiser; false refuses it (403 admin_read_refused). Administering (members, "
        "visibility, deletion) is never refused.",
    )
    retention_days: int | None = Field(
        None,
        ge=1,
        description="Delete meetings and dictations (captions, corrections, notes, links, memberships) whose "
        "last activity (end, else start, else creation) is older than this many days; unset: keep them. "
        "Live meetings are never deleted; the access audit keeps its rows (they hold no text).",
    )
    retention_check_s: float = Field(
        3600.0,
        gt=0,
        description="How often the retention sweep runs, seconds (only with CAPTIONS_RETENTION_DAYS).",
    )
    anonymous_requests_per_minute: int = Field(
        30,
        ge=1,
        description="Requests per client address per minute to the routes that need no login besides the "
        "login itself (opening a view-only link, checking and accepting an invite); beyond, 429.",
    )
    max_http_requests: int = Field(
        100,
        ge=1,
        description="HTTP requests handled at once, /healthz and /readyz aside (they are never refused); "
        "beyond, 503 busy. WebSockets do not count: they have their own caps.",
    )
    idle_timeout_s: float = Field(30.0, gt=0, description="Close a session with no audio/keepalive, seconds.")
    max_session_s: float = Field(4 * 3600, gt=0, description="Longest streaming session, seconds.")
    max_audio_rate: float = Field(1.5, ge=1.0, description="Sustained audio rate allowed, x real time.")
    audio_burst_s: float = Field(4.0, gt=0, description="Audio a client may send ahead of real time, s.")
    max_resend_s: float = Field(
        30.0,
        ge=0,
        description="Audio a resuming client may send again at once (from the end of the last stored final, "
        "plus what it captured while disconnected), s; older audio is not asked for.",
    )
    # The degradation ladder (backend/sessions/ladder.py): backlog beyond the chunk being decoded, in
    # seconds, at which each rung is climbed, in this order.
    ladder_second_pass_off_s: float = Field(
        0.5, gt=0, description="Ladder rung 1: new finals keep the streaming pass's text, s of backlog."
    )
    ladder_greedy_s: float = Field(1.0, gt=0, description="Ladder rung 2: new sessions decode greedy, s.")
    lag_drop_partials_s: float = Field(
        2.0,
        gt=0,
        description="Ladder rung 3: a partial every other chunk (and a session this far behind gets "
        "none), s.",
    )
    lag_not_ready_s: float = Field(4.0, gt=0, description="Ladder rung 4: /readyz fails and 503s start, s.")
    lag_busy_s: float = Field(
        8.0, gt=0, description="Ladder rung 5: the newest live session is closed 1013 (one at a time), s."
    )
    ladder_down_after_s: float = Field(
        10.0, gt=0, description="Calm time (backlog under half a rung's level) before a rung is left, s."
    )
    ladder_shed_interval_s: float = Field(5.0, gt=0, description="Time between two sessions shed, s.")
    ladder_window_s: float = Field(
        2.0, ge=0, description="The ladder reads the least backlog of this long (a backlog that stays), s."
    )
    drain_timeout_s: float = Field(30.0, gt=0, description="Time given to live sessions on shutdown, s.")
    max_terms_per_vocabulary: int = Field(20000, ge=1, description="Terms in one vocabulary.")
    max_terms_per_session: int = Field(1000, ge=0, description="Extra terms a session may `configure`.")
    engine_max_batch_streams: int = Field(64, ge=1, description="Streams in one decode step.")
    engine_max_wait_ms: float = Field(20.0, ge=0, description="Wait for more ready streams, ms.")
    engine_max_hold_ms: float = Field(
        0.0,
        ge=0,
        description="While the decoder is busy (over 60 % of the last 3 s), wait this long for more streams "
        "to share a step (0: never; docs/loadtest.md, issue 37).",
    )
    engine_sentence_pause_ms: int = Field(
        800,
        ge=0,
        description="Beam decoding: a pause this long after a word that closes a sentence (. ? !) commits "
        "the utterance as a final (others end on 800 ms of silence, long ones on 320 ms). 480 gives finals "
        "~0.3 s sooner and cost 1.7 WER points on real speech (docs/loadtest.md, issue 37).",
    )
    beam_size: int = Field(
        8,
        ge=1,
        le=16,
        description="Beam width of beam decoding (8: ~2 WER points better than 4 on the bundled model, for "
        "1.12-1.17x the step cost; 16 gained nothing more).",
    )
    default_decoding: Literal["greedy", "beam"] = Field(
        "beam",
        description="Decoding of meetings and dictations created without one: beam (with the LM: ~10 WER "
        "points better on the bundled model) or greedy (cheapest).",
    )
    engine_left_context_s: float = Field(
        2.0, ge=0, description="Audio re-encoded before each chunk by buffered (non cache-aware) models, s."
    )
    engine_leading_silence_dbfs: float = Field(
        -70.0,
        le=0,
        description="A stream's first chunks without speech are not decoded: the decoder starts at the first "
        "chunk with speech, so silence before speech cannot become a stray first word ('To a', 0.00 s). "
        "Speech is judged against the stream's own noise floor (20 ms frames 12 dB over it) and must also "
        "stand over this absolute level (dBFS), so a quiet microphone is captioned. -200: decode them all.",
    )
    engine_input_gain_max_db: float = Field(
        30.0,
        ge=0,
        le=60,
        description="The most a stream's quiet speech is raised (a slow per-stream gain towards the level "
        "the model reads best, held in pauses so their noise is not pumped up; never lowered). 0: no gain.",
    )
    engine_int8_encoder: bool = Field(
        False,
        description="Run the streaming encoder's linear layers in dynamic int8 on the CPU (~2.4x faster "
        "encoder steps; see models/MODEL_CARD.md for its accuracy).",
    )
    engine_right_context_s: float = Field(
        0.56, ge=0, description="Look-ahead after each chunk for buffered models, s: accuracy for latency."
    )
    biasing_alpha: float = Field(
        2.0,
        ge=0,
        description="Weight of the vocabulary boosting scores (2.0 with the evidence margin and the term "
        "check: keyword F level with 3.0 alone at precision 100 %, no harm to speech without terms, on the "
        "dev sets; docs/eval.md, issue 35).",
    )
    biasing_graph_mode: Literal["case_insensitive", "case_sensitive_tree", "char"] = Field(
        "case_insensitive",
        description="How vocabularies compile: case-insensitive BPE graph (TurboBias 2.0, default), NeMo's "
        "case-sensitive tree, or one arc per character (character-vocabulary models).",
    )
    biasing_evidence_margin: float | None = Field(
        10.0,
        ge=0,
        description="Beam search adds a vocabulary boost to a label only where the model's own score of it "
        "is within this many nats of its best label: a term is favoured where the audio makes it plausible, "
        "not pulled in against it; the second pass's Whisper search too (10 with alpha 2, chosen on the dev "
        "sets; unset: every label; docs/eval.md, issue 35).",
    )
    biasing_tau: float = Field(
        2.0,
        ge=0,
        le=8,
        description="How each token's share of a term's score spreads over the token's characters in the "
        "case-insensitive graph (0: evenly, larger: at the token's end as in NeMo's tree; 2.0: best F on the "
        "dev sets, beam with the LM, docs/eval.md issue 25).",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses(cls, value: str) -> str:
        for item in filter(None, (part.strip() for part in value.split(","))):
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError as exc:
                raise ValueError(f"{item!r} is not an address or network (CIDR); '*' is refused") from exc
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        value = value.lower()
        if value not in {"debug", "info", "warning", "error"}:
            raise ValueError(f"expected one of debug/info/warning/error, got {value!r}")
        return value

    @field_validator("allowed_chunk_s")
    @classmethod
    def _multiple_of_frame(cls, value: list[float]) -> list[float]:
        for chunk_s in value:
            frames = round(chunk_s / 0.08)
            if frames < 1 or abs(frames * 0.08 - chunk_s) > 1e-6:
                raise ValueError(f"chunk {chunk_s} s is not a multiple of the 0.08 s encoder frame")
        return value


def engine_config(settings: Settings, **overrides: Any) -> EngineConfig:
    """The engine configuration the service runs with these settings; ``overrides`` replace single fields
    (the evaluation and benchmarks change what they measure and keep the rest as served)."""
    from backend.engine.types import EngineConfig

    served = {
        "model": settings.model,
        "device": settings.device,
        "torch_threads": settings.torch_threads,
        "max_batch_streams": settings.engine_max_batch_streams,
        "max_wait_ms": settings.engine_max_wait_ms,
        "max_hold_ms": settings.engine_max_hold_ms,
        "sentence_pause_ms": settings.engine_sentence_pause_ms,
        "beam_size": settings.beam_size,
        "allowed_chunk_s": tuple(settings.allowed_chunk_s),
        "biasing_alpha": settings.biasing_alpha,
        "biasing_graph_mode": settings.biasing_graph_mode,
        "biasing_tau": settings.biasing_tau,
        "lm_path": lm_path(settings),
        "lm_alpha": settings.lm_alpha,
        "lm_token_bonus": settings.lm_token_bonus,
        "left_context_s": settings.engine_left_context_s,
        "right_context_s": settings.engine_right_context_s,
        "leading_silence_dbfs": settings.engine_leading_silence_dbfs,
        "input_gain_max_db": settings.engine_input_gain_max_db,
        "vocabulary_cache_dir": str(settings.cache_dir),
        "final_pass": resolve_final_pass(settings.model, settings.final_pass),
        "final_pass_model": settings.final_pass_model,
        "final_pass_beam_size": settings.final_pass_beam_size,
        "final_pass_alpha": settings.final_pass_alpha,
        "final_pass_term_deficit": settings.final_pass_term_deficit,
        "final_pass_arbitration": settings.final_pass_arbitration,
        "final_pass_refine_partials_s": settings.final_pass_refine_partials_s,
        "int8_encoder": settings.engine_int8_encoder,
        "biasing_evidence_margin": settings.biasing_evidence_margin,
    }
    unknown = set(overrides) - set(served)
    if unknown:
        raise TypeError(f"not engine settings: {sorted(unknown)}")
    return EngineConfig(**{**served, **overrides})


def lm_path(settings: Settings) -> str | None:
    """The LM the engine fuses into beam search, or None (see ``Settings.lm``)."""
    return resolve_lm(settings.model, settings.lm)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
