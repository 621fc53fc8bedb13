"""Judge comparison: a candidate judge run as a shadow on the experts' reviews of a use case,
set against the current judge on the experts' own labels (issue 18, point 4).

`services.py` plans, starts, executes and adopts; `selectors.py` reads a comparison's figures.
The models (JudgeComparison, ShadowRun) are review's, in review/models.py.
"""
