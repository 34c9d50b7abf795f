"""How Paimon's Spark source spells a partition when it orders a plan's
splits: Java `StreamHelper.compareBinaryRow` turns each partition into
Spark's path fragment (`PartitioningUtils.getPathFragment`) of the values
Paimon's `InternalRowPartitionComputer.generatePartValues` gives, and
compares the two strings (Java `String.compareTo`: UTF-16 code units).

Each value goes through three hands, each reproduced here:
1. Paimon: with `partition.legacy-name` (default true) the internal value's
   `toString()` — a date is its epoch day (`20455`), a timestamp
   `LocalDateTime.toString()` (`2026-01-02T03:04`), a decimal its plain
   string with its scale (`12.50`), a boolean `true`; without it, a cast to
   string (`2026-01-02`, `2026-01-02 03:04:00`). A null, empty or blank
   value becomes `partition.default-name`.
2. Spark: numbers are parsed and printed again
   (`removeLeadingZerosFromNumberTypePartition`).
3. Spark: `escapePathName` (`%2F` for `/`, ...), `name=value` joined by
   `/`, no trailing `/`.
"""

from __future__ import annotations

import datetime
import decimal
import re
import struct
from typing import List, Optional

DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"

# Spark's ExternalCatalogUtils.charToEscape (not on Windows).
_ESCAPED = set(chr(c) for c in range(0x01, 0x20)) | set("\"#%'*/:=?\\\x7f{[]^")

_EPOCH = datetime.date(1970, 1, 1)


def escape_path_name(text: str) -> str:
    """Spark's `ExternalCatalogUtils.escapePathName`: `%XX` (upper-case hex
    of the UTF-16 unit's low byte) for each character that needs it."""
    return "".join(f"%{ord(c) & 0xFF:02X}" if c in _ESCAPED else c for c in text)


def _scientific_digits(value: float, single: bool):
    """(sign, digits, exponent) of the shortest decimal that reads back as
    `value` (a float32 when `single`): value = 0.digits * 10**exponent."""
    if single:
        bits = struct.pack(">f", value)
        for precision in range(1, 10):
            text = f"{value:.{precision}g}"
            if struct.pack(">f", float(text)) == bits:
                break
    else:
        text = repr(value)
    sign, digits, exponent = decimal.Decimal(text).normalize().as_tuple()
    digits_text = "".join(map(str, digits))
    return sign, digits_text, len(digits_text) + exponent


def java_float_string(value: float, single: bool = False) -> str:
    """Java's `Double.toString` (`Float.toString` when `single`): decimal
    notation for 1e-3 <= |x| < 1e7 with at least one digit after the point,
    otherwise `d.dddE<n>`. Shortest round-trip digits, as JDK 19+ prints
    (older JDKs print more digits for a few values)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    sign, digits, point = _scientific_digits(value, single)
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{digits}"
        whole, fraction = digits[:point].ljust(point, "0"), digits[point:]
        return f"{prefix}{whole}.{fraction or '0'}"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{prefix}{mantissa}E{point - 1}"


def _local_date_time_string(value: datetime.datetime) -> str:
    """Java `LocalDateTime.toString()`: seconds only when not zero (or a
    fraction is), the fraction in groups of three digits."""
    text = value.strftime("%Y-%m-%dT%H:%M")
    nanos = value.microsecond * 1000
    if value.second or nanos:
        text += f":{value.second:02d}"
    if nanos:
        if nanos % 1_000_000 == 0:
            text += f".{nanos // 1_000_000:03d}"
        else:
            text += f".{nanos // 1000:06d}"
    return text


def _cast_timestamp_string(value: datetime.datetime, precision: int) -> str:
    """Paimon's timestamp-to-string cast (`DateTimeUtils.formatTimestamp`):
    `yyyy-MM-dd HH:mm:ss`, the nine-digit fraction's trailing zeros dropped
    down to the type's precision."""
    fraction = f"{value.microsecond * 1000:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{fraction}" if fraction else text


def _precision(type_text: str, default: int) -> int:
    match = re.search(r"\((\d+)", type_text)
    return int(match.group(1)) if match else default


def paimon_value_string(value, type_text: str, legacy: bool) -> Optional[str]:
    """What Paimon's partition computer writes for one value of a column of
    Paimon type `type_text` (None for a null)."""
    if value is None:
        return None
    kind = type_text.upper()
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind.startswith("DATE"):
        if isinstance(value, datetime.date):
            return str((value - _EPOCH).days) if legacy else value.isoformat()
        return str(value)
    if kind.startswith("TIMESTAMP") and isinstance(value, datetime.datetime):
        return _local_date_time_string(value) if legacy else _cast_timestamp_string(value, _precision(kind, 6))
    if isinstance(value, decimal.Decimal):
        # BigDecimal.toPlainString: the scale kept, never an exponent.
        return format(value, "f")
    if isinstance(value, float):
        return java_float_string(value, single=kind.startswith("FLOAT"))
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT")


def _spark_reprinted(text: str, type_text: str) -> str:
    """Spark's `removeLeadingZerosFromNumberTypePartition`: integral and
    floating values parsed and printed again (a default name stays: Spark
    fails to parse it there, see docs/spark.md)."""
    kind = type_text.upper().split("(")[0].split(" ")[0]
    try:
        if kind in _INTEGRAL:
            return str(int(text))
        if kind in ("FLOAT", "DOUBLE"):
            return java_float_string(float(text), single=kind == "FLOAT")
    except ValueError:
        pass
    return text


def partition_fragment(names: List[str], types: List[str], values: list, default_name: str, legacy: bool) -> str:
    """The partition as Spark's `getPathFragment` spells it: `k1=v1/k2=v2`."""
    parts = []
    for name, type_text, value in zip(names, types, values):
        text = paimon_value_string(value, type_text, legacy)
        if text is None or not text.strip():
            text = default_name
        else:
            text = _spark_reprinted(text, type_text)
        parts.append(f"{escape_path_name(name)}={escape_path_name(text)}")
    return "/".join(parts)


def java_order_key(text: str) -> bytes:
    """A key that sorts as Java's `String.compareTo` (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


class PartitionOrder:
    """The sort key of a split's partition for one table."""

    def __init__(self, table):
        self.names = list(getattr(table, "partition_keys", None) or [])
        by_name = {field.name: str(getattr(field.type, "type", field.type)) for field in table.fields}
        self.types = [by_name.get(name, "STRING") for name in self.names]
        options = table.options.options.to_map()
        self.default_name = options.get("partition.default-name", DEFAULT_PARTITION_NAME)
        self.legacy = str(options.get("partition.legacy-name", "true")).strip().lower() != "false"

    def fragment(self, partition) -> str:
        values = list(getattr(partition, "values", None) or []) if partition is not None else []
        return partition_fragment(self.names, self.types, values, self.default_name, self.legacy)

    def key(self, partition) -> bytes:
        return java_order_key(self.fragment(partition))
