"""minitransformer: the Transformer of "Attention Is All You Need", built from scratch.

The shared package of the course *Transformers desde cero · Transformers from scratch*.
One module per concept: ``attention``, ``attention_cost``, ``positional``, ``layers``, ``model``,
``data``, ``tokenizer``, ``train``, ``decoding``, ``sampling``, ``kv_cache``, ``generation``,
``gpt``, ``modern``, ``hf_import``, ``pretrained``, ``reference``, ``compression``, ``analysis``;
``course`` holds the course's props (recipes, corpora, runs, the numerics profile), ``viz`` the figures,
``exercises`` the checkers of the notebooks' exercises. The map, in import order:
``src/minitransformer/README.md``.
"""

__version__ = "0.1.0"
