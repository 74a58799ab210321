"""The ``sureon`` command line: the top layer, above the datasets (``builders``, ``public_converters``) and the
models (``recipes``). It only parses arguments and calls into those layers."""
