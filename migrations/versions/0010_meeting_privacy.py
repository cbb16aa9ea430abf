"""Meetings only their members see, and the access audit (issue 46)

Adds ``meetings.visibility`` ("private", the default, or "organisation"), ``meeting_members`` (who may
read a meeting besides its organiser) and ``access_audit`` (who read, exported, edited, deleted a meeting or
dictation or made a viewer link; no caption text, no foreign keys: it outlives what it is about).

What people could do before stays: each existing meeting's owner and everyone who spoke in it become its
members (one ``INSERT ... SELECT`` over a ``UNION``, the same SQL on SQLite and PostgreSQL).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-08 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

BACKFILL = (
    "INSERT INTO meeting_members (meeting_id, user_id, added_at) "
    "SELECT pairs.meeting_id, pairs.user_id, CURRENT_TIMESTAMP FROM ("
    "SELECT id AS meeting_id, owner_id AS user_id FROM meetings WHERE owner_id IS NOT NULL "
    "UNION "
    "SELECT meeting_id, user_id FROM stream_sessions WHERE user_id IS NOT NULL"
    ") AS pairs"
)


def upgrade() -> None:
    with op.batch_alter_table("meetings") as batch:
        batch.add_column(
            sa.Column("visibility", sa.String(length=16), server_default="private", nullable=False)
        )
    op.create_table(
        "meeting_members",
        sa.Column("meeting_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("added_by", sa.Integer(), nullable=True),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["meeting_id"],
            ["meetings.id"],
            name=op.f("fk_meeting_members_meeting_id_meetings"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_meeting_members_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["added_by"], ["users.id"], name=op.f("fk_meeting_members_added_by_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("meeting_id", "user_id", name=op.f("pk_meeting_members")),
    )
    with op.batch_alter_table("meeting_members") as batch:
        batch.create_index(batch.f("ix_meeting_members_user_id"), ["user_id"], unique=False)
    op.create_table(
        "access_audit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor_id", sa.Integer(), nullable=True),
        sa.Column("actor_name", sa.String(length=64), nullable=False),
        sa.Column("actor_role", sa.String(length=16), nullable=False),
        sa.Column("via", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("meeting_id", sa.Integer(), nullable=False),
        sa.Column("meeting_kind", sa.String(length=16), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("admin_access", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("detail", sa.String(length=100), server_default="", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_access_audit")),
    )
    with op.batch_alter_table("access_audit") as batch:
        batch.create_index(batch.f("ix_access_audit_created_at"), ["created_at"], unique=False)
        batch.create_index(batch.f("ix_access_audit_meeting_id"), ["meeting_id"], unique=False)
    op.execute(BACKFILL)


def downgrade() -> None:
    with op.batch_alter_table("access_audit") as batch:
        batch.drop_index(batch.f("ix_access_audit_meeting_id"))
        batch.drop_index(batch.f("ix_access_audit_created_at"))
    op.drop_table("access_audit")
    with op.batch_alter_table("meeting_members") as batch:
        batch.drop_index(batch.f("ix_meeting_members_user_id"))
    op.drop_table("meeting_members")
    with op.batch_alter_table("meetings") as batch:
        batch.drop_column("visibility")
