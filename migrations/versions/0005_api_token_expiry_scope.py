"""API tokens expire, can be revoked and can be read-only (issue 29)

Adds ``api_tokens.expires_at``, ``revoked_at``, ``scope`` and ``last_used_at``. Tokens created before this
revision keep working as they did: their ``expires_at`` stays NULL (no expiry) and their scope is ``write``
(the server default), until an admin or their owner revokes them. New tokens always get an expiry.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-06 04:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("scope", sa.String(length=8), nullable=False, server_default="write"))
        batch.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("last_used_at")
        batch.drop_column("scope")
        batch.drop_column("revoked_at")
        batch.drop_column("expires_at")
