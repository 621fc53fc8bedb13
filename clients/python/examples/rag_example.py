"""A plain openai RAG call, recorded with Treue by two added lines (marked below).

Runs against any OpenAI-compatible endpoint:

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=sk-… MODEL=gpt-4o-mini \\
    TREUE_URL=http://127.0.0.1:8000 TREUE_KEY=trk_… TREUE_USE_CASE=kundenservice \\
    python clients/python/examples/rag_example.py "Wie oft wird der Behälter geprüft?"

The flush at the end is only there to print what was sent; a service never waits for it.
"""

import os
import sys

from openai import OpenAI
from treue_client import TreueClient, instrument

USE_CASE = os.environ.get("TREUE_USE_CASE", "kundenservice")
DOCUMENTS = [
    {"id": "po-3", "text": "Prüfintervall: Behälter werden alle 5 Jahre geprüft.",
     "source": "Prüfordnung.pdf"},
    {"id": "po-4", "text": "Straßenfahrzeuge sind von der Prüfung ausgenommen.",
     "source": "Prüfordnung.pdf"},
    {"id": "ko-1", "text": "Die Prüfung kostet 1.250,00 € je Behälter.", "source": "Kosten.pdf"},
]


def retrieve(question: str, k: int = 2) -> list[dict]:
    """A stand-in for the vector search: rank by shared words."""
    words = set(question.lower().split())
    scored = [
        {**doc, "score": len(words & set(doc["text"].lower().split())) / max(1, len(words))}
        for doc in DOCUMENTS
    ]
    return sorted(scored, key=lambda d: d["score"], reverse=True)[:k]


def main() -> None:
    question = sys.argv[1] if len(sys.argv) > 1 else "Wie oft wird der Behälter geprüft?"
    llm = OpenAI()  # OPENAI_API_KEY and OPENAI_BASE_URL from the environment

    # The two added lines: a client for Treue, and the openai client instrumented.
    treue = TreueClient(os.environ["TREUE_URL"], os.environ["TREUE_KEY"], USE_CASE)
    instrument(llm, treue)

    chunks = retrieve(question)
    sources = "\n\n".join(chunk["text"] for chunk in chunks)
    completion = llm.chat.completions.create(
        model=os.environ.get("MODEL", "gpt-4o-mini"),
        messages=[
            {"role": "system", "content": "Answer only from the sources."},
            {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}"},
        ],
        # Optional: the retrieved chunks, shown next to the answer in Treue, and the question
        # as the user asked it (without the sources); removed before the request goes out.
        treue_chunks=chunks,
        treue_question=question,
    )
    print(completion.choices[0].message.content)
    # Answers are sent in the background; the client flushes at interpreter exit by itself.
    print(treue.stats() if treue.flush(10) else "Treue not reached yet", file=sys.stderr)


if __name__ == "__main__":
    main()
