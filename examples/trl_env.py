"""A TRL environment class, written for TRL's GRPOTrainer(environment_factory=CapitalsEnv) and trained with
esopt unchanged (configs/trl-env.yaml; docs/envs.md "TRL environment classes").

Each dataset row asks for a country's capital (columns prompt, country, answer). The agent may look facts up
with two tools; the reward functions below read the final reply and the environment."""

CAPITALS = {
    "France": "Paris", "Germany": "Berlin", "Italy": "Rome", "Spain": "Madrid", "Portugal": "Lisbon",
    "Austria": "Vienna", "Poland": "Warsaw", "Greece": "Athens", "Norway": "Oslo", "Sweden": "Stockholm",
    "Finland": "Helsinki", "Denmark": "Copenhagen", "Ireland": "Dublin", "Hungary": "Budapest",
    "Egypt": "Cairo", "Kenya": "Nairobi", "Peru": "Lima", "Chile": "Santiago", "Japan": "Tokyo",
    "China": "Beijing", "Thailand": "Bangkok", "Cuba": "Havana", "Canada": "Ottawa", "Australia": "Canberra",
}


class CapitalsEnv:
    """Capitals: look a country's capital up, then answer with the city."""

    def __init__(self):
        self.country = None
        self.lookups = 0

    def reset(self, **kwargs) -> str | None:
        self.country = kwargs.get("country")
        self.lookups = 0
        return "You may call lookup_capital(country) or list_countries(letter) before answering."

    def lookup_capital(self, country: str) -> str:
        """Look up the capital city of a country.

        Args:
            country: the country's English name, e.g. France
        """
        self.lookups += 1
        capital = CAPITALS.get(country.strip().title())
        if capital is None:
            raise ValueError(f"no capital known for {country!r}")
        return capital

    def list_countries(self, letter: str) -> list:
        """List the countries whose names start with a letter.

        Args:
            letter: the first letter
        """
        return [c for c in CAPITALS if c.lower().startswith(letter.strip().lower()[:1])]


def correct_answer(completions, answer, **kwargs) -> list:
    """1.0 when the final reply names the row's capital."""
    return [float(a.lower() in c[-1]["content"].lower()) for c, a in zip(completions, answer)]


def looked_up(environments, **kwargs) -> list:
    """A small bonus for using the lookup tool."""
    return [0.1 if env.lookups else 0.0 for env in environments]
