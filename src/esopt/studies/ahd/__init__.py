"""The heuristic-design grid (esopt adapt --env ahd-<problem>) and its table."""
