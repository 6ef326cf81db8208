"""Studies: everything that drives runs (benchmarks, esopt adapt, the heuristic-design grid); above the library, never imported by it."""
