"""Dictation notes kept on the server, user display names and invite links (issue 30)

Adds ``dictation_drafts`` (a dictation's note as last saved from the dictation page, one row per dictation,
owner only), ``user_invites`` (a one-time link with which a new user sets their password; only the SHA-256
of its token is stored, it expires, ``used_at`` marks it spent) and ``users.display_name`` (NULL: show the
username, as before).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("display_name", sa.String(length=100), nullable=True))
    op.create_table(
        "user_invites",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_user_invites_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name=op.f("fk_user_invites_created_by_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_user_invites")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_user_invites_token_hash")),
    )
    with op.batch_alter_table("user_invites") as batch:
        batch.create_index(batch.f("ix_user_invites_user_id"), ["user_id"], unique=False)
    op.create_table(
        "dictation_drafts",
        sa.Column("meeting_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["meeting_id"],
            ["meetings.id"],
            name=op.f("fk_dictation_drafts_meeting_id_meetings"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_dictation_drafts_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("meeting_id", name=op.f("pk_dictation_drafts")),
    )
    with op.batch_alter_table("dictation_drafts") as batch:
        batch.create_index(batch.f("ix_dictation_drafts_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("dictation_drafts") as batch:
        batch.drop_index(batch.f("ix_dictation_drafts_user_id"))
    op.drop_table("dictation_drafts")
    with op.batch_alter_table("user_invites") as batch:
        batch.drop_index(batch.f("ix_user_invites_user_id"))
    op.drop_table("user_invites")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("display_name")
