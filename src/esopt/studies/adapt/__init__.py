"""esopt adapt: the test-time adaptation grid, its table and merge, and the GEPA arm."""
