"""Transcript corrections and merged speaker labels (issue 39)

Adds ``caption_edits``: each correction of a stored final, kept beside it (the final's own text in
``caption_segments`` is never changed, so evaluation reads what the recognizer wrote); the latest edit of a
final is the text the transcript, the meeting view and the exports show, and the rows are its history (who
changed what, when). Adds ``meeting_participants.merged_into``: a speaker label shown as another
participant's in that meeting (NULL: their own).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06 21:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "caption_edits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("segment_id", sa.Integer(), nullable=False),
        sa.Column("meeting_id", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("edited_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["segment_id"],
            ["caption_segments.id"],
            name=op.f("fk_caption_edits_segment_id_caption_segments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["meeting_id"],
            ["meetings.id"],
            name=op.f("fk_caption_edits_meeting_id_meetings"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["edited_by"], ["users.id"], name=op.f("fk_caption_edits_edited_by_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_caption_edits")),
    )
    with op.batch_alter_table("caption_edits") as batch:
        batch.create_index(batch.f("ix_caption_edits_segment_id"), ["segment_id"], unique=False)
        batch.create_index(batch.f("ix_caption_edits_meeting_id"), ["meeting_id"], unique=False)
    with op.batch_alter_table("meeting_participants") as batch:
        batch.add_column(sa.Column("merged_into", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("meeting_participants") as batch:
        batch.drop_column("merged_into")
    with op.batch_alter_table("caption_edits") as batch:
        batch.drop_index(batch.f("ix_caption_edits_meeting_id"))
        batch.drop_index(batch.f("ix_caption_edits_segment_id"))
    op.drop_table("caption_edits")
