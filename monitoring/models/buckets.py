"""Bucketing a value by fixed edges in the database: a timestamp by its week, a similarity by
its bucket (the dashboards' groups, and the rollups' rebuild)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Func, IntegerField


def _as_is(value: Any, expression: Any, connection: Any) -> Any:
    return value


class Bucket(Func):
    """The bucket a value falls in: 0 below edges[0], i for edges[i-1] <= value < edges[i],
    len(edges) from the last edge up; NULL for NULL. The [low, high) buckets of the domain.

    Written out as a CASE over fixed bounds. For weeks that is the bounds `iso_week_bounds`
    draws (daylight saving included), alike in every database, and on PostgreSQL about twice as
    fast as truncating each timestamp in a time zone; compiled by hand because Django's Case
    with When objects costs ~10 ms to compile for 26 weeks.
    """

    output_field = IntegerField()

    @property
    def convert_value(self) -> Any:
        # The database returns integers already; Django's int() per row costs ~5 µs a row.
        return _as_is

    def __init__(self, expression: Any, edges: Sequence[Any], *, datetimes: bool = False):
        super().__init__(expression)
        self.edges = tuple(edges)
        self.datetimes = datetimes

    def as_sql(
        self, compiler: Any, connection: Any, function: str | None = None,
        template: str | None = None, arg_joiner: str | None = None, **extra_context: Any,
    ) -> tuple[str, tuple[Any, ...]]:
        sql, params = compiler.compile(self.source_expressions[0])
        adapt = connection.ops.adapt_datetimefield_value if self.datetimes else None
        parts, out = [f"CASE WHEN {sql} IS NULL THEN NULL"], list(params)
        for i, edge in enumerate(self.edges):
            parts.append(f"WHEN {sql} < %s THEN {i}")
            out += [*params, adapt(edge) if adapt else edge]
        parts.append(f"ELSE {len(self.edges)} END")
        return " ".join(parts), tuple(out)

    def as_postgresql(
        self, compiler: Any, connection: Any, **extra_context: Any
    ) -> tuple[str, tuple[Any, ...]]:
        # The same buckets by binary search over the edges: a fifth faster than the CASE on
        # 50,000 rows. width_bucket is NULL for NULL, 0 below the first edge, i from edge i.
        if not self.edges:
            return self.as_sql(compiler, connection, **extra_context)
        sql, params = compiler.compile(self.source_expressions[0])
        kind = "timestamptz" if self.datetimes else (
            "integer" if all(isinstance(e, int) for e in self.edges) else "double precision"
        )
        holes = ", ".join(["%s"] * len(self.edges))
        return f"width_bucket({sql}, ARRAY[{holes}]::{kind}[])", (*params, *self.edges)
