"""Launchable training and evaluation scripts (TRL style) and their YAML recipes."""
