"""WebArena-format tasks on sites you host (WebArena, WebArena-Lite, or configs of your own), run by esopt.

- :mod:`scoring`: the text and URL checks (shared with the local shop, esopt.envs.browser.webshop)
- :mod:`sites`: ``__SHOPPING__``-style placeholders and the ``WA_*`` variables that fill them
- :mod:`judge`: the LLM judge for ``fuzzy_match`` (an OpenAI-compatible endpoint you name)
- :mod:`configs`: where configs come from (the ``browsergym-webarenalite`` and
  ``libwebarena`` packages' data files, or your own JSON file), what esopt can grade, splits
- :mod:`preflight`: what a task needs from this machine (sites, judge, login)
- :mod:`grade`, :mod:`episode`, :mod:`task`: grading in the browser and the BrowserGym task
- :mod:`namespaces`: the ``webarenalite.*``, ``webarena.*`` and ``webarena-file:`` ids for env.id=browsergym
- :mod:`verified`: grading episodes with WebArena-Verified's own CLI, out of process

Importing any of these reads no file and touches no network; only :mod:`task`
needs BrowserGym and Playwright. See docs/web.md.
"""
