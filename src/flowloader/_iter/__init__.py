"""Iterators that run in the main process: in-process loading and the worker-pool driver."""
