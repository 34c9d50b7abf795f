"""Paimon's Spark source reads session settings as options
(`spark.paimon.*` through `OptionUtils.copyWithSQLConf`,
`spark.datasource.paimon.*` through `SessionConfigSupport`); a Python data
source cannot read Spark's conf when a query starts, so `register(spark)`
takes them as of that call."""

from __future__ import annotations

from harness import PaimonTable

from tidemark.paimon.source import register, session_options


def test_session_settings_are_options_and_the_querys_own_win(spark, tmp_path):
    table = PaimonTable(tmp_path / "warehouse", "session")
    table.commit()

    def columns(**options):
        reader = spark.readStream.format("tidemark_paimon").option("path", table.path).option("consumer-id", "c")
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load().schema.names

    assert columns() == ["id", "part", "value"]
    spark.conf.set("spark.datasource.paimon.read.changelog", "true")
    spark.conf.set("spark.paimon.tidemark.token", "never-from-the-session")
    try:
        register(spark)
        assert columns() == ["rowkind", "id", "part", "value"], "the session's setting is an option"
        assert columns(**{"read.changelog": "false"}) == ["id", "part", "value"], "the query's option wins"
    finally:
        spark.conf.unset("spark.datasource.paimon.read.changelog")
        spark.conf.unset("spark.paimon.tidemark.token")
        register(spark)
    assert columns() == ["id", "part", "value"]


def test_paimon_session_prefixes_in_order_and_tidemark_options_left_out():
    conf = {
        "spark.paimon.read.changelog": "false",
        "spark.paimon.scan.mode": "latest",
        "spark.datasource.paimon.read.changelog": "true",
        "spark.paimon.tidemark.token": "secret",
        "spark.datasource.paimon.TIDEMARK.endpoint": "elsewhere:1",
        "spark.sql.shuffle.partitions": "2",
    }
    assert session_options(conf) == {"read.changelog": "true", "scan.mode": "latest"}
