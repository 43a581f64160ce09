"""RL-trained LLM agents and reasoners."""
