"""Figures for the course. Every function takes ``lang="es"|"en"`` for its labels and
returns the matplotlib figure (it never calls ``plt.show()`` nor writes files); ``viz.live`` builds the
lecture's live controls (sliders, pickers) on the same functions."""
