"""env.id=gem: GEM's text games and tasks (the ``gem-llm`` package, ``pip install 'esopt[gem]'``) as
esopt environments. spec.py: the options and the spec; env.py: the TextEnv adapter around one GEM
env; offline.py: importing GEM, and which of its ids need data this machine does not have."""
