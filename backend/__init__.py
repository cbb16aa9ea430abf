"""Captions: the real-time captioning service (web layer, protocol, engine, database)."""
