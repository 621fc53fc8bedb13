"""Send a RAG service's answers to Treue without slowing the service down or breaking it.

``TreueClient`` queues answers in memory and a background thread ships them in batches;
``instrument`` wraps an ``openai`` client so that every chat completion is recorded with its
token log-probabilities.
"""

from treue_client.client import TreueClient
from treue_client.openai_wrapper import instrument

__all__ = ["TreueClient", "instrument"]
__version__ = "0.1.0"
