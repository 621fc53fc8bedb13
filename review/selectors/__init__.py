"""Reads of the expert review: the queue and what was submitted (`reviews.py`), calibration and
drift (`calibration.py`)."""
