"""Issue 28 §2: what pyroscope-io's configure() took at start-up still
starts, with its meaning (coerced, or defaulted with a warning naming the
setting); what cannot work at all is still an error naming it. One row per
input, citing pyroscope-io 1.4.0's pyroscope/__init__.py, whose configure()
hands every value to its native initialize_agent unchecked. The core does
the coercion (core/src/pipeline/config.c), so Node and Ruby read the same
rows in their own tables."""
import pytest

import pyroscope

# (id, keyword arguments, {core name: string form after resolving})
STARTS = [
    # configure(application_name=None): passed on as is; the server names a
    # series without a name unknown_service.
    ("no_application_name", {}, {"application_name": "unknown_service"}),
    ("empty_application_name", {"application_name": ""},
     {"application_name": "unknown_service"}),
    # configure(server_address=...): any text, never parsed before an upload.
    ("server_without_scheme", {"application_name": "a", "server_address": "pyroscope:4040"},
     {"server_address": "http://pyroscope:4040"}),
    ("server_host_only", {"application_name": "a", "server_address": "localhost"},
     {"server_address": "http://localhost"}),
    # Python logging's most severe level name (our log_level keyword; the
    # anchor's enable_logging used the logger's own level).
    ("log_level_critical", {"application_name": "a", "log_level": "CRITICAL"},
     {"log_level": "error"}),
    # configure(sample_rate=...): any int went to the agent; out of our range
    # it is the nearest bound (the core warns once, naming the setting).
    ("sample_rate_zero", {"application_name": "a", "sample_rate": 0}, {"sample_rate": "100"}),
    ("sample_rate_huge", {"application_name": "a", "sample_rate": 1000000},
     {"sample_rate": "10000"}),
    ("upload_interval_10ms", {"application_name": "a", "upload_interval": 0.01},
     {"upload_interval": "0.05"}),
]

# (id, keyword arguments, text the message names): cannot work at all.
REFUSED = [
    ("server_none_even_with_http", {"application_name": "a", "server_address": "py roscope:4040"},
     "server_address"),
    ("server_other_scheme", {"application_name": "a", "server_address": "ftp://h"},
     "server_address"),
    ("sample_rate_no_number", {"application_name": "a", "sample_rate": float("nan")},
     "sample_rate"),
]


@pytest.mark.parametrize("kwargs,want", [r[1:] for r in STARTS], ids=[r[0] for r in STARTS])
def test_starts(kwargs, want, monkeypatch):
    for var in ("PYROSCOPE_APPLICATION_NAME", "OTEL_SERVICE_NAME", "PYROSCOPE_SERVER_ADDRESS"):
        monkeypatch.delenv(var, raising=False)
    got = pyroscope._resolve(**kwargs)
    for name, value in want.items():
        assert got[name] == value, name


@pytest.mark.parametrize("kwargs,needle", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused(kwargs, needle):
    with pytest.raises(ValueError, match=needle) as err:
        pyroscope._resolve(**kwargs)
    if "roscope:4040" in kwargs.get("server_address", ""):
        assert "with http:// in front" in str(err.value)


def test_wrong_type_names_the_type_given():
    # a path-like value is its text for a text setting; elsewhere the error
    # names its type, not the str it became (it said "not str")
    import pathlib
    assert pyroscope._resolve(output_dir=pathlib.Path("/tmp/x"))["output_dir"] == "/tmp/x"
    with pytest.raises(TypeError, match=r"^sample_rate must be a number, not PosixPath$"):
        pyroscope._resolve(sample_rate=pathlib.Path("100"))
