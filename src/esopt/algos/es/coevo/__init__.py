"""Context co-evolution: a skill library, a genome of logits over it, its sampling and update,
and the search the trainer runs with it (coevo.mode context or both; docs/method.md)."""
