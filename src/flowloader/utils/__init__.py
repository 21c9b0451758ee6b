"""PyTorch-style import paths: ``flowloader.utils.data`` mirrors ``torch.utils.data``."""
