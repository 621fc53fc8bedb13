"""Plain Python: spans as records, the attribute names of the conventions Treue reads, and the
assembly of a trace's spans into an answer. No django, no protobuf."""
