"""The task family of env.id=code-tool: a seed gives one arithmetic question and its integer answer."""
from __future__ import annotations

import random

FAMILIES = ("product", "sum")


def problem(seed: int, family: str = "product", digits: int = 3, terms: int = 2) -> tuple[str, int]:
    """(question, answer) for a seed: ``product``: the product of ``terms`` numbers of ``digits`` digits;
    ``sum``: the sum of ``terms`` such numbers."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    rng = random.Random(seed)
    nums = [rng.randint(10 ** (digits - 1), 10 ** digits - 1) for _ in range(terms)]
    if family == "product":
        answer = 1
        for n in nums:
            answer *= n
        return f"Compute {' * '.join(map(str, nums))}.", answer
    return f"Compute {' + '.join(map(str, nums))}.", sum(nums)
