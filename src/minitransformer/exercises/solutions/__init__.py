"""The answer keys: the worked solutions of notebook NN in ``nbNN.py``, in notebook order.

Each solution carries its exercise's id (``@solution("01.softmax", es, en)``), as its checker does;
``show_solution`` imports a notebook's answer key only when one of its solutions is asked for.
"""
