"""esopt serve: the ES loop behind an OpenAI-compatible endpoint, for agents esopt does not run itself.

A harness (any program that calls a chat-completions endpoint and ends with a score) plays each
generation's members as models named ``member-K`` (``center``: the unperturbed weights), posts one
reward per episode, and finishes the generation; esopt makes the update and writes the same
history, metrics and report as a local run (docs/serve.md).

- runner.py: ServeRunner, the member runner whose members are played by the client: it publishes
  each generation (or evaluation), serves until the client finishes it, and returns the posted
  rewards to the trainer;
- scheduler.py: the model thread's loop: which waiting chat requests decode together, under which
  weights (members switched in place, or batched as rows with low-rank noise), in slices;
- desk.py: what the HTTP threads read and do (the generation played, rewards, the job queue);
- episodes.py: a generation's and an evaluation's episodes, and the file their rewards are kept in;
- jobs.py: a job for the model thread (a chat, a finish, a wake-up) and the future its caller waits on;
- limits.py: what a request may ask for, checked before the model thread sees it;
- protocol.py: the request and response schemas (OpenAI's chat completions; the /es routes);
- app.py: the HTTP routes (Starlette, served by uvicorn in a thread of its own);
- command.py: ``esopt serve CONFIG`` / ``--resume RUN``.
"""
