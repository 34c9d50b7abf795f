"""testdata/spark_partition_fragments.json against the real Spark JVM:
every fragment is what Spark's own `PartitioningUtils.getPathFragment`
makes of Paimon's strings (the step Paimon's Spark source orders splits
by), and the Java `toString` values Paimon's legacy partition names use
are what the JVM prints (test_paimon_plan.py checks the source's own
functions against the same file)."""

from __future__ import annotations

import datetime

import pytest
from harness import partition_fragment_cases

CASES = partition_fragment_cases()


def java_to_string(jvm, value, paimon_type: str):
    """What Java's `toString()` of Paimon's internal value prints, asked of
    the JVM (None where Paimon's value is no plain Java object)."""
    kind = paimon_type.upper()
    if isinstance(value, bool):
        return jvm.java.util.Objects.toString(value)
    if kind.startswith("DATE"):
        return str(jvm.java.time.LocalDate.parse(value.isoformat()).toEpochDay())
    if kind.startswith("TIMESTAMP") and isinstance(value, datetime.datetime):
        return jvm.java.time.LocalDateTime.parse(value.isoformat()).toString()
    if kind.startswith("DOUBLE"):
        return jvm.java.lang.Double.toString(value)
    if kind.startswith("FLOAT"):
        return jvm.java.lang.Float.toString(jvm.java.lang.Float.parseFloat(repr(value)))
    if kind in ("INT", "BIGINT"):
        return jvm.java.lang.Long.toString(value)
    return None


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_shared_partition_fragments_are_sparks_own(spark, case):
    jvm = spark._jvm
    spec = jvm.java.util.HashMap()
    for column, text in zip(case["columns"], case["paimon_strings"]):
        # Paimon's partition computer: a null or blank value is the default name.
        spec.put(column, case["default_name"] if text is None or not text.strip() else text)
    schema = jvm.org.apache.spark.sql.types.StructType.fromDDL(case["spark_types"])
    fragment = jvm.org.apache.spark.sql.execution.datasources.PartitioningUtils.getPathFragment(
        jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(spec), schema
    )
    assert fragment == case["fragment"]
    if case["legacy"]:
        for value, paimon_type, text in zip(case["decoded"], case["paimon_types"], case["paimon_strings"]):
            java = java_to_string(jvm, value, paimon_type)
            if java is not None and value is not None:
                assert java == text, f"Java prints {java!r} for {value!r} ({paimon_type})"
