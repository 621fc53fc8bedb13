"""One framework for background jobs that are claimed with a lease: judge runs, investigation
questions and any later kind (jobs/models.py, jobs/framework.py)."""
