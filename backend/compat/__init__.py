"""The ecosystem's protocols (issue 47): an OpenAI-compatible file transcription route (``openai_api``), a
Deepgram-compatible live socket (``deepgram_ws``), and recordings decoded into transcripts (``recordings``).

Every one of them decodes through the same batched engine as the live sessions (``files`` for whole files),
with the same vocabulary validation, compile cache and second pass; only the wire formats are theirs."""
