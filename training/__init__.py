"""How the bundled model (``models/captions-embedded.nemo``) and its LM were made: text, speech synthesis,
feature caches, training, export and evaluation (recipe: ``models/MODEL_CARD.md``). Not used by the
service."""
