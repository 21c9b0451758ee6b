"""The wire between the main process and the workers: messages, batch encoding, shared memory."""
