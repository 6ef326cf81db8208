"""esopt: evolution strategies for fine-tuning LLM agents with inference memory."""

__version__ = "0.1.0"
