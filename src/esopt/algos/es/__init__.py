"""Evolution strategies: the trainer (one ES step per generation) and context co-evolution (coevo/)."""
