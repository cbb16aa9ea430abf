"""Contextual-biasing evaluation (issue 7): a synthetic test set and a sweep of the streaming engine over it.

- ``python -m eval make-set``: earnings-call and clinical-dictation sentences with rare terms, per-utterance,
  per-call and full term lists (lowercase and display casing), spoken by held-out festival voices.
- ``python -m eval run``: every configuration (biasing list, list casing, decoding, chunk, tau, alpha) decoded
  by the engine as the server decodes (concurrent streams, exact chunks), scored with keyword P/R/F (NeMo's
  ``compute_fscore`` definition), WER and RTFx; table, CSV, JSON and a WER-vs-F plot.
- ``python -m eval report``: one table and plot from several runs. See ``docs/eval.md``.
"""
