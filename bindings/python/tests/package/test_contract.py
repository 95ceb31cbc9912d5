"""Issue 27: one contract in the core. Walks the core's settings table
(pyroscope.SETTINGS) with the cases every binding shares
(tests/contract/settings_cases.json): each setting by keyword and by
variable, the precedence rule, a bad value naming the setting, and the
drift items settled in one direction."""

import json
import logging
import os
import uuid

import pytest

import pyroscope

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
with open(os.path.join(ROOT, "tests", "contract", "settings_cases.json")) as f:
    CASES = json.load(f)

ROWS = [r for r in pyroscope.SETTINGS if r["python"] and not r["external"]]


def case(row):
    return CASES["by_name"].get(row["name"]) or CASES["by_kind"][row["kind"]]


def keyword_value(row, text):
    """A variable's text as this runtime's keyword value."""
    kind = row["kind"]
    if kind == "bool":
        return pyroscope._native.parse_bool(row["name"], text)
    if kind in ("number", "integer"):
        return int(text)
    if kind == "pairs":
        return dict(p.split("=", 1) for p in text.split(","))
    return text


def base(row):
    kw = {} if row["name"] == "application_name" else {"application_name": "app"}
    kw.update(CASES["need"].get(row["name"], {}))
    return kw


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for k in list(os.environ):
        if k.startswith(("PYROSCOPE_", "OTEL_")):
            monkeypatch.delenv(k)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_every_setting_by_keyword_and_by_variable(row, monkeypatch):
    text, want = case(row)
    kw = row["python"].split("|")[0]
    got = pyroscope._resolve(**base(row), **{kw: keyword_value(row, text)})
    assert got[row["name"]] == want
    monkeypatch.setenv(row["env"], text)
    assert pyroscope._resolve(**base(row))[row["name"]] == want


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_keyword_beats_variable_beats_otel_beats_default(row, monkeypatch):
    text, want = case(row)
    kw = row["python"].split("|")[0]
    # a bad variable beside its keyword is not even read
    monkeypatch.setenv(row["env"], CASES["bad_variable"][row["kind"]])
    assert pyroscope._resolve(**base(row), **{kw: keyword_value(row, text)})[row["name"]] == want
    monkeypatch.delenv(row["env"])
    if row["default"] and row["name"] != "server_address":
        assert pyroscope._resolve(**base(row))[row["name"]] == row["default"]
    for otel in (row["otel_env"] or "").split(","):
        if otel:
            other = CASES["otel_value"][row["name"]]
            monkeypatch.setenv(otel, other)
            assert pyroscope._resolve(**base(row))[row["name"]] == other
            monkeypatch.setenv(row["env"], text)
            assert pyroscope._resolve(**base(row))[row["name"]] == want
            monkeypatch.delenv(row["env"])
            monkeypatch.delenv(otel)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_a_bad_value_names_the_setting(row, monkeypatch):
    kw = row["python"].split("|")[0]
    bad = CASES["bad_variable"][row["kind"]]
    monkeypatch.setenv(row["env"], bad)
    with pytest.raises(ValueError, match=f"environment variable {row['env']}: .*{row['name']}"):
        pyroscope._resolve(**base(row))
    monkeypatch.delenv(row["env"])
    value = {"number": CASES["bad_keyword_number"], "integer": CASES["bad_keyword_number"],
             "bool": "maybe", "pairs": "k"}.get(row["kind"], bad)
    with pytest.raises((ValueError, TypeError), match=row["name"]):
        pyroscope._resolve(**base(row), **{kw: value})


# --- the drift items of issue 27, settled the same way in all three suites

def test_defaults_are_the_cores(monkeypatch):
    got = pyroscope._resolve(application_name="app")
    for name, want in CASES["defaults"].items():
        assert got[name] == want, name
    assert got["spy_name"] == "pyspy"


def test_an_otlp_endpoint_alone_means_no_default_server(monkeypatch):
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"):
        monkeypatch.setenv(var, "http://collector:4318")
        got = pyroscope._resolve(application_name="app")
        assert (got["server_address"], got["otlp_endpoint"]) == ("", "http://collector:4318")
        monkeypatch.delenv(var)


@pytest.mark.parametrize("env,want", CASES["env_cases"])
def test_variables_alone(monkeypatch, env, want):
    """The anchors' other spellings, an auth token beside basic auth, a full
    variable name beside its alias (settings_cases.json env_cases)."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    got = pyroscope._resolve(application_name="app")
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize("env", CASES["env_refused"])
def test_one_setting_by_two_variables_that_differ_is_refused(monkeypatch, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match="are the same setting"):
        pyroscope._resolve(application_name="app")


def test_spy_name_variable_is_honoured(monkeypatch):
    monkeypatch.setenv("PYROSCOPE_SPY_NAME", "custom")
    assert pyroscope._resolve(application_name="app")["spy_name"] == "custom"


def test_adhoc_server_address_is_below_the_keyword(monkeypatch):
    monkeypatch.setenv("PYROSCOPE_ADHOC_SERVER_ADDRESS", "http://adhoc:1")
    assert pyroscope._resolve(application_name="app")["server_address"] == "http://adhoc:1"
    got = pyroscope._resolve(application_name="app", server_address="http://kw:1")
    assert got["server_address"] == "http://kw:1"


def test_durations_take_units():
    got = pyroscope._resolve(application_name="app", upload_interval="1m", stop_timeout="500ms")
    assert (got["upload_interval"], got["stop_timeout"]) == ("60", "0.5")


def test_resource_attributes_and_otlp_protocol_are_keywords():
    got = pyroscope._resolve(application_name="app", resource_attributes="team=a",
                             otlp_protocol="http/json")
    assert (got["resource_attributes"], got["otlp_protocol"]) == ("team=a", "http/json")


def test_an_unknown_variable_is_warned_about_once_per_process(monkeypatch, caplog, tmp_path):
    name = "PYROSCOPE_NO_SUCH_" + uuid.uuid4().hex[:8].upper()
    monkeypatch.setenv(name, "1")
    with caplog.at_level(logging.WARNING, logger="pyroscope"):
        for _ in range(2):
            pyroscope.configure(application_name="app", output_dir=str(tmp_path))
            pyroscope.shutdown()
    assert sum(name in r.getMessage() for r in caplog.records) == 1


def test_stats_has_every_counter_of_the_cores_table(tmp_path):
    """Issue 27: stats() is built from the core's counter table (Python had
    no uploads_unconfirmed, Ruby and Node other subsets)."""
    table = pyroscope._native.stats_table()
    assert len(table) > 15 and all(meaning for _, meaning in table)
    pyroscope.configure(application_name="app", output_dir=str(tmp_path))
    try:
        got = pyroscope.stats()
    finally:
        pyroscope.shutdown()
    assert [name for name, _ in table if name not in got] == []
    assert isinstance(got["effective_rate_hz"], float) and isinstance(got["uploads_unconfirmed"], int)
