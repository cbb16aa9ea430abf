"""term weights become boost levels from 0.5 to 2 (issue 35)

Weights used to be any number from 0.1 to 10 multiplying a term's boost; at 2 a list already turned captions
into its terms. The accepted range is now 0.5 (low) to 2 (highest); stored weights outside it are clamped to
it, and the vocabularies they belong to get a new version (so live meetings recompile them). Downgrading
keeps the clamped values (the old range holds them).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06 18:30:00
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

MIN_WEIGHT = 0.5
MAX_WEIGHT = 2.0


def upgrade() -> None:
    outside = f"(weight < {MIN_WEIGHT} OR weight > {MAX_WEIGHT})"
    op.execute(
        "UPDATE vocabularies SET version = version + 1 "
        f"WHERE id IN (SELECT vocabulary_id FROM terms WHERE {outside})"  # noqa: S608 - constants only
    )
    op.execute(
        f"UPDATE terms SET weight = CASE WHEN weight < {MIN_WEIGHT} THEN {MIN_WEIGHT} "
        f"ELSE {MAX_WEIGHT} END WHERE {outside}"  # noqa: S608 - constants only
    )


def downgrade() -> None:
    pass
