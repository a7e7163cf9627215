"""Models by name: `hf:NAME` specs resolved to shipped configurations and written as model files
(`spec.py`), and what those files run (`runtime.py`, which imports transformers lazily).
See docs/model-zoo.md."""
