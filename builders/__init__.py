"""Dataset builders: the Sureon builder, record schemas, the prompt formatter, frame sampling and Hub export."""
