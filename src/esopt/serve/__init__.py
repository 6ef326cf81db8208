"""esopt serve: the ES loop behind an OpenAI-compatible endpoint, for agents esopt does not run itself.

A harness (any program that calls a chat-completions endpoint and ends with a score) plays each
generation's members as models named ``member-K`` (``center``: the unperturbed weights), posts one
reward per episode, and finishes the generation; esopt makes the update and writes the same
history, metrics and report as a local run (docs/serve.md).

- runner.py: ServeRunner, the member runner whose members are played by the client: it owns the
  model in the training thread, serves chat requests there (members switched in place, or batched
  as rows with low-rank noise) and returns the posted rewards to the trainer;
- protocol.py: the request and response schemas (OpenAI's chat completions; the /es routes);
- app.py: the HTTP routes (Starlette, served by uvicorn in a thread of its own);
- command.py: ``esopt serve CONFIG`` / ``--resume RUN``.
"""
