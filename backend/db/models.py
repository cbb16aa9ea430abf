"""SQLAlchemy 2 declarative models. Every table lives here; migrations are written from them."""

from __future__ import annotations

import enum
from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Timezone-aware now in UTC (stored as UTC everywhere)."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base with a constraint naming convention (stable names for migrations)."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Role(enum.StrEnum):
    ADMIN = "admin"
    MEMBER = "member"


class MeetingStatus(enum.StrEnum):
    SCHEDULED = "scheduled"
    LIVE = "live"
    ENDED = "ended"


class MeetingKind(enum.StrEnum):
    MEETING = "meeting"
    DICTATION = "dictation"


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[Role] = mapped_column(Enum(Role, native_enum=False, length=16), default=Role.MEMBER)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Carried in every cookie session; logout increments it, so every cookie issued before stops working.
    session_epoch: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # How people see the user (the admin's "Users" tab sets it); None: the username (migration 0007).
    display_name: Mapped[str | None] = mapped_column(String(100))


class ApiToken(Base):
    """A script's bearer token; only its SHA-256 is stored. ``scope`` is "read" (safe methods only) or
    "write". A NULL ``expires_at`` (tokens made before migration 0005) never expires; revoking sets
    ``revoked_at``, the row is kept so the admin page can still show it."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    scope: Mapped[str] = mapped_column(String(8), default="write", server_default="write")
    # Updated at most once a minute per token (backend.api.deps), so a busy script costs few writes.
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Vocabulary(Base):
    __tablename__ = "vocabularies"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)
    terms: Mapped[list[Term]] = relationship(
        back_populates="vocabulary", cascade="all, delete-orphan", order_by="Term.id"
    )


class Term(Base):
    __tablename__ = "terms"
    __table_args__ = (UniqueConstraint("vocabulary_id", "normalized", name="uq_terms_vocabulary_normalized"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    vocabulary_id: Mapped[int] = mapped_column(ForeignKey("vocabularies.id", ondelete="CASCADE"), index=True)
    text: Mapped[str] = mapped_column(String(200))
    normalized: Mapped[str] = mapped_column(String(200))
    display: Mapped[str | None] = mapped_column(String(200))
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    alternates: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)
    vocabulary: Mapped[Vocabulary] = relationship(back_populates="terms")


meeting_vocabularies = Table(
    "meeting_vocabularies",
    Base.metadata,
    Column("meeting_id", ForeignKey("meetings.id", ondelete="CASCADE"), primary_key=True),
    Column("vocabulary_id", ForeignKey("vocabularies.id", ondelete="CASCADE"), primary_key=True),
)


class Meeting(Base):
    """A meeting, or a dictation session (kind=dictation: one speaker with personal lists)."""

    __tablename__ = "meetings"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[MeetingKind] = mapped_column(
        Enum(MeetingKind, native_enum=False, length=16), default=MeetingKind.MEETING
    )
    title: Mapped[str] = mapped_column(String(200))
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)
    chunk_ms: Mapped[int] = mapped_column(Integer, default=1120)
    decoding: Mapped[str] = mapped_column(String(16), default="greedy")
    status: Mapped[MeetingStatus] = mapped_column(
        Enum(MeetingStatus, native_enum=False, length=16), default=MeetingStatus.SCHEDULED
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Who may read it besides its members: "private" (the organiser and members) or "organisation" (every
    # account); migration 0010. A dictation is always private.
    visibility: Mapped[str] = mapped_column(String(16), default="private", server_default="private")
    vocabularies: Mapped[list[Vocabulary]] = relationship(
        secondary=meeting_vocabularies, order_by="Vocabulary.id"
    )


class StreamSession(Base):
    """One speaker's stream in a meeting; survives reconnects (resume token, stored hashed)."""

    __tablename__ = "stream_sessions"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    meeting_id: Mapped[int] = mapped_column(ForeignKey("meetings.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    resume_token_hash: Mapped[str] = mapped_column(String(64))
    resume_expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    audio_offset_s: Mapped[float] = mapped_column(Float, default=0.0)
    # The last caption number handed out. Incremented in the transaction that stores the caption, so two
    # replicas serving the same session (a resume while the dropped connection still flushes) never collide.
    last_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Which connection owns the session: each resume claims the next number with a conditional UPDATE, so
    # of two resumes at once (on any replicas) exactly one wins; an older connection learns it was superseded.
    generation: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class CaptionSegment(Base):
    """A committed caption; persisted before it is sent to the client."""

    __tablename__ = "caption_segments"
    __table_args__ = (UniqueConstraint("session_id", "seq", name="uq_caption_segments_session_seq"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    meeting_id: Mapped[int] = mapped_column(ForeignKey("meetings.id", ondelete="CASCADE"), index=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("stream_sessions.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    start_s: Mapped[float] = mapped_column(Float)
    end_s: Mapped[float] = mapped_column(Float)
    words: Mapped[list[dict]] = mapped_column(JSON, default=list)
    matched_terms: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MeetingParticipant(Base):
    """A speaker's display name in one meeting (the meeting view's label); absent = the username."""

    __tablename__ = "meeting_participants"
    meeting_id: Mapped[int] = mapped_column(ForeignKey("meetings.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    display_name: Mapped[str] = mapped_column(String(100))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)
    # Shown as this other participant of the meeting ("merge two labels"); None: their own label (0009).
    merged_into: Mapped[int | None] = mapped_column(Integer)


class CaptionEdit(Base):
    """A correction of a stored final, kept beside it: ``caption_segments.text`` stays as recognized (what
    evaluation reads); the latest edit is what the transcript, the meeting view and the exports show, and
    the rows are its history (who changed what, when)."""

    __tablename__ = "caption_edits"
    id: Mapped[int] = mapped_column(primary_key=True)
    segment_id: Mapped[int] = mapped_column(ForeignKey("caption_segments.id", ondelete="CASCADE"), index=True)
    meeting_id: Mapped[int] = mapped_column(ForeignKey("meetings.id", ondelete="CASCADE"), index=True)
    text: Mapped[str] = mapped_column(Text)
    edited_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ViewerLink(Base):
    """A read-only link to a meeting's live view, for people without an account. Only the SHA-256 of its
    token is stored; it always expires; revoking sets ``revoked_at`` and keeps the row for the list."""

    __tablename__ = "viewer_links"
    id: Mapped[int] = mapped_column(primary_key=True)
    meeting_id: Mapped[int] = mapped_column(ForeignKey("meetings.id", ondelete="CASCADE"), index=True)
    label: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Updated at most once a minute per link, so many viewers cost few writes.
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Ticket(Base):
    """Single-use WebSocket ticket; only the hash is stored so a DB leak cannot be replayed."""

    __tablename__ = "tickets"
    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    meeting_id: Mapped[int] = mapped_column(ForeignKey("meetings.id", ondelete="CASCADE"))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class UserInvite(Base):
    """A one-time link with which a new user sets their password. Only the SHA-256 of its token is stored;
    it expires; ``used_at`` is set when it is used, and a newer invite for the same user replaces it."""

    __tablename__ = "user_invites"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class DictationDraft(Base):
    """The note a user wrote with a dictation, as last saved from the dictation page (any device). Only its
    owner reads or writes it; deleting the dictation or the user deletes it."""

    __tablename__ = "dictation_drafts"
    meeting_id: Mapped[int] = mapped_column(ForeignKey("meetings.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    text: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MeetingMember(Base):
    """Someone the organiser or an admin added to a meeting (its owner always may read it, and so may whoever
    spoke in it: ``backend.api.access.member_of``). Migration 0010 wrote one for each meeting's owner and
    speakers. Deleting the meeting or the user deletes the row."""

    __tablename__ = "meeting_members"
    meeting_id: Mapped[int] = mapped_column(ForeignKey("meetings.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    added_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    added_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AccessAudit(Base):
    """One access to a meeting's or dictation's content: who read, exported, edited, deleted it or made a
    viewer link, when, from which address. Append-only; never holds caption text. ``meeting_id`` and
    ``actor_id`` are no foreign keys: the record outlives the meeting and the user (``actor_name``
    keeps who)."""

    __tablename__ = "access_audit"
    id: Mapped[int] = mapped_column(primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    actor_id: Mapped[int | None] = mapped_column(Integer)
    actor_name: Mapped[str] = mapped_column(String(64))
    actor_role: Mapped[str] = mapped_column(String(16))
    via: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(32))
    meeting_id: Mapped[int] = mapped_column(Integer, index=True)
    meeting_kind: Mapped[str] = mapped_column(String(16))
    owner_id: Mapped[int | None] = mapped_column(Integer)
    # True when an admin who is neither the organiser nor a member reached the content.
    admin_access: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    address: Mapped[str] = mapped_column(String(64))
    detail: Mapped[str] = mapped_column(String(100), default="", server_default="")
