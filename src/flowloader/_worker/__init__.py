"""Code that runs inside worker processes."""
