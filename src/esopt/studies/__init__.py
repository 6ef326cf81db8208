"""Studies: everything that drives runs, above the library and never imported by it: the benchmarks
(`esopt bench`, bench.py) in machine/ (how fast and heavy esopt runs on this hardware) and method/
(does the method learn), with common.py and runs.py shared by both; esopt adapt (adapt/); the
heuristic-design grid (ahd/)."""
