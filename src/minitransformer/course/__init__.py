"""The course's props: the recipes, corpora and runs the notebooks use, not concepts they teach."""
