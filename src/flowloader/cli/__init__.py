"""The ``flowloader`` command."""
