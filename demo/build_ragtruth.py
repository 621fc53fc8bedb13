"""Writes the demo's two RAGTruth files from RAGTruth's own QA files.

    python demo/build_ragtruth.py /path/to/ragtruth-qa

The directory holds RAGTruth's question-answering part as the LRP4RAG repository redistributes
it: ``QA.jsonl`` (one question with its three passages a line) and one file of answers per
model and kind (``response_llama_7b_hallucination.jsonl``, ...). This script keeps what the demo
uses and nothing else, unchanged:

- ``ragtruth_qa_sources.jsonl``: ``source_id``, ``question``, ``passages`` (the three passages
  as a list, split where RAGTruth joined them as ``passage N:``);
- ``ragtruth_qa_answers.jsonl``: ``id``, ``source_id``, ``model``, ``response``, ``labels``
  (``start``, ``end``, ``label_type`` of each annotated span; the annotators' notes are left
  out).

Questions and answers are stored apart because the four models answered the same 989
questions: the passages once, not four times. Both files are sorted by id.
"""

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_PASSAGE = re.compile(r"(?:\A|\n\n)passage \d+:")


def passages(joined: str) -> list[str]:
    return [p.strip() for p in _PASSAGE.split(joined)[1:]]


def main(source: Path) -> None:
    sources = []
    with (source / "QA.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            info = row["source_info"]
            split = passages(info["passages"])
            if len(split) != 3:
                raise SystemExit(f"source {row['source_id']}: {len(split)} passages, not 3")
            sources.append({"source_id": row["source_id"], "question": info["question"],
                            "passages": split})
    answers = []
    for path in sorted(source.glob("*hallucination.jsonl")):
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                answers.append({
                    "id": row["id"], "source_id": row["source_id"], "model": row["model"],
                    "response": row["response"],
                    "labels": [{"start": s["start"], "end": s["end"],
                                "label_type": s["label_type"]} for s in row["labels"]],
                })
    known = {s["source_id"] for s in sources}
    missing = [a["id"] for a in answers if a["source_id"] not in known]
    if missing:
        raise SystemExit(f"answers without their question: {missing[:5]}")
    for name, rows, key in (("ragtruth_qa_sources.jsonl", sources, "source_id"),
                            ("ragtruth_qa_answers.jsonl", answers, "id")):
        rows.sort(key=lambda r: int(r[key]))
        with (HERE / name).open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{name}: {len(rows)} lines")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]))
