"""The BrowserGym family: any BrowserGym task as a TextEnv (env.py), its action language (actions.py),
observations (obs.py), the shared browser (browser.py), task sets and splits (tasks.py), worker
processes (workers.py), the report renderer (render.py), the local shop (webshop/) and WebArena
(webarena/) as task namespaces, and the harness's spec (spec.py: env.id=browsergym)."""
