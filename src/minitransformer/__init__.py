"""minitransformer: the Transformer of "Attention Is All You Need", built from scratch.

The shared package of the course *Transformers desde cero · Transformers from scratch*.
One module per concept: ``attention``, ``positional``, ``layers``, ``model``, ``data``,
``train``, ``decoding``, ``pretrained``, ``viz``; ``exercises`` checks the notebooks'
exercises.
"""

__version__ = "0.1.0"
