"""Rubrics: pure functions of an episode record that score it."""
