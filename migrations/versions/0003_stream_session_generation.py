"""resume claims decided by the database (stream_sessions.generation)

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-06 02:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stream_sessions") as batch:
        batch.add_column(sa.Column("generation", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("stream_sessions") as batch:
        batch.drop_column("generation")
