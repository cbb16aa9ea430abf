"""Pure text transforms: no I/O, no database, no web framework, nothing of the service.

Written form for display (``written_form``: "six hundred milligrams" -> "600 mg"), spoken dictation
commands carried out (``dictation_commands``), caption files (``captions_export``: SRT, VTT, text), and
vocabulary terms at the edge (``vocab``: parsing, validation, the caption rewrite; ``termforms``: display
forms). Imports only the libraries ``biasing`` and ``captions_model``.
"""
