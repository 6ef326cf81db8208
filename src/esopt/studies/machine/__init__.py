"""Machine studies: how fast and how heavy esopt runs on this hardware, and whether its ways of
computing agree: seconds, memory, number formats (dtypes, update rounding), caches and batching,
processes (Ray, the sandbox) and the engines and services around it (llama.cpp, esopt serve, a
browser).

The rule: a study lives here when it compares ways of computing the same thing (same algorithm,
same settings) by what they cost or how closely they agree; its answer changes with the machine
or the software, not with the method's settings. Whether training learns, and with which
settings, is studies/method/. The `esopt bench` rows of these modules: machine/benches.py."""
