"""The hot path's writes as plain SQL: the checkpoint and event writes a served run or an
eval case makes at every step (studio.work.checkpoints, studio.deployments.events).

The ORM builds each statement from a queryset every time it is sent; for these few
fixed statements that building was most of a scripted step's cost (docs/serving.md,
"Performance"). Here each statement's text is made once per model and column list, from
the model's own table and column names, and every value is adapted by its own field
(`get_db_prep_save`: a JSONField's value becomes the backend's JSON, a datetime the
backend's datetime), so the rows written are the rows the ORM would write, on SQLite and
on Postgres alike. The statements go through Django's connection, so they join the
caller's transaction (`transaction.atomic`) and its statement counting
(`connection.execute_wrapper`)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import connection, models


@cache
def _columns(model: type[models.Model], names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """(the quoted column names, the fields) of `names`, fields of `model`."""
    fields = tuple(model._meta.get_field(name) for name in names)
    columns = [getattr(f, "column", None) for f in fields]
    if not all(isinstance(c, str) for c in columns):
        raise ValueError(f"{model.__name__}: {names} are not all columns")
    return tuple(connection.ops.quote_name(c) for c in columns if isinstance(c, str)), fields


def _table(model: type[models.Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _adapt(fields: Sequence[Any], values: Sequence[Any]) -> list[Any]:
    out = []
    for f, v in zip(fields, values, strict=True):
        if f.remote_field is not None and hasattr(v, "prepare_database_save"):
            v = v.prepare_database_save(f)  # a model instance for a foreign key: its key, as the ORM does
        out.append(f.get_db_prep_save(v, connection))
    return out


def insert(model: type[models.Model], names: tuple[str, ...], rows: Sequence[Sequence[Any]]) -> None:
    """INSERT `rows` (values in the order of `names`) into `model`'s table, one statement
    (a step's few events or one journal entry: no batching, unlike bulk_create). For
    plain columns: a field with its own placeholder SQL (geometry, ranges) is not
    handled."""
    if not rows:
        return
    quoted, fields = _columns(model, names)
    one = "(" + ", ".join(["%s"] * len(names)) + ")"
    sql = f"INSERT INTO {_table(model)} ({', '.join(quoted)}) VALUES {', '.join([one] * len(rows))}"
    params = [p for row in rows for p in _adapt(fields, row)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _equalities(where: dict[str, Any]) -> None:
    if any(v is None for v in where.values()):  # `= NULL` matches nothing; the ORM would say IS NULL
        raise ValueError(f"a None in the conditions {sorted(where)}: these writes match by equality only")


def update(model: type[models.Model], where: dict[str, Any], values: dict[str, Any]) -> int:
    """UPDATE `model`'s rows matching every `where` equality with `values`; how many."""
    _equalities(where)
    set_names, where_names = tuple(values), tuple(where)
    set_sql, set_fields = _columns(model, set_names)
    where_sql, where_fields = _columns(model, where_names)
    assignments = ", ".join(f"{c} = %s" for c in set_sql)
    conditions = " AND ".join(f"{c} = %s" for c in where_sql)
    params = _adapt(set_fields, list(values.values())) + _adapt(where_fields, list(where.values()))
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {_table(model)} SET {assignments} WHERE {conditions}", params)
        return int(cursor.rowcount)


def max_of(model: type[models.Model], column: str, where: dict[str, Any]) -> int:
    """The largest `column` of `model`'s rows matching `where` (0 when none)."""
    _equalities(where)
    (col_sql,), _ = _columns(model, (column,))
    where_sql, where_fields = _columns(model, tuple(where))
    conditions = " AND ".join(f"{c} = %s" for c in where_sql)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MAX({col_sql}) FROM {_table(model)} WHERE {conditions}",
            _adapt(where_fields, list(where.values())),
        )
        row = cursor.fetchone()
    return int(row[0] or 0) if row else 0
