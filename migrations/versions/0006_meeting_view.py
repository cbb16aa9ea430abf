"""Meeting view: per-meeting speaker names and read-only viewer links (issue 30)

Adds ``meeting_participants`` (a speaker's display name in one meeting; absent = the account's username)
and ``viewer_links`` (a read-only link to a meeting's live view; only the SHA-256 of its token is stored,
it expires, and revoking keeps the row so the admin page can still list it).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06 08:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "meeting_participants",
        sa.Column("meeting_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("display_name", sa.String(length=100), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["meeting_id"],
            ["meetings.id"],
            name=op.f("fk_meeting_participants_meeting_id_meetings"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_meeting_participants_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("meeting_id", "user_id", name=op.f("pk_meeting_participants")),
    )
    op.create_table(
        "viewer_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("meeting_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["meeting_id"],
            ["meetings.id"],
            name=op.f("fk_viewer_links_meeting_id_meetings"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name=op.f("fk_viewer_links_created_by_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_viewer_links")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_viewer_links_token_hash")),
    )
    with op.batch_alter_table("viewer_links") as batch:
        batch.create_index(batch.f("ix_viewer_links_meeting_id"), ["meeting_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("viewer_links") as batch:
        batch.drop_index(batch.f("ix_viewer_links_meeting_id"))
    op.drop_table("viewer_links")
    op.drop_table("meeting_participants")
