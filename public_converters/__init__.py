"""Readers of the public surgical datasets into the common schema, and the shared templating stages."""
