"""Database access: SQLAlchemy 2 async models, sessions and migrations."""
