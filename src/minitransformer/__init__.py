"""minitransformer: the Transformer of "Attention Is All You Need", built from scratch.

The shared package of the course *Transformers desde cero · Transformers from scratch*, one module per
concept, in five layers (a module imports only from its own layer and the ones listed before it):

* foundations: ``i18n`` (the two languages), ``runtime`` (seed, threads, device, the notebooks' setup cell);
* concepts: ``kv_cache``, ``sampling``, ``attention``, ``attention_cost``, ``data``, ``tokenizer``,
  ``positional``, ``layers``, ``model``, ``decoding``, ``train``, ``generation``, ``gpt``, ``modern``,
  ``distributed``, ``hf_import``, ``pretrained``, ``reference``, ``compression``, ``ngram``, ``arithmetic_coder``,
  ``model_compressor``, ``analysis``, ``circuits``;
* ``course``: the course's props (recipes, corpora, runs, the numerics profile);
* ``viz``: the figures, and ``viz.live``, the live controls that redraw them;
* ``exercises``: the checkers of the notebooks' exercises, and their answer keys.

The map, in import order, with what each module holds: ``src/minitransformer/README.md``. What each
release changed: ``CHANGELOG.md``.
"""

__version__ = "2.0.1.dev0"
