"""caption numbers allocated in the database (stream_sessions.last_seq)

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 14:50:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stream_sessions") as batch:
        batch.add_column(sa.Column("last_seq", sa.Integer(), nullable=False, server_default="0"))
    op.execute(
        "UPDATE stream_sessions SET last_seq = COALESCE("
        "(SELECT MAX(seq) FROM caption_segments WHERE caption_segments.session_id = stream_sessions.id), 0)"
    )


def downgrade() -> None:
    with op.batch_alter_table("stream_sessions") as batch:
        batch.drop_column("last_seq")
