"""Training algorithms as plug-ins (esopt.train.algorithm names them): es (with context co-evolution as a component), grpo, gepa."""
