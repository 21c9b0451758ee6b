"""Bridges to optional frameworks; the only place that names them."""
