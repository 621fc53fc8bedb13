"""The way in: the ingest API (`api/`) and its schemas, decoding and rate limit; tier 1, the
log-probabilities (`domain/logprobs.py`); the random sample (`domain/sampling.py`); storing an
answer and handing the sampled ones to the judge (`services.py`)."""
