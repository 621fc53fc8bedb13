"""Statistics for the dashboard: stratified weekly and pooled estimates with intervals
(`estimates`), the claim-level share (`claims`), their inputs from histograms of values
rather than lists (`counts`, for the weekly rollups), what a week's interval can decide
(`precision`), the trigger's lift (`lift`).

One import path for callers: everything public is re-exported here.
"""
