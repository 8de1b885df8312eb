"""redact_uri: every secret of a store URI hidden, everything else kept; and the errors and
reprs that show a URI use it."""

from __future__ import annotations

import pytest

from decider.stores import UnsupportedStoreURI, open_store, redact_uri
from decider.stores.redact import is_secret_name, redact_text

SECRET = "S3cr3t-pw"


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("sqlite:///events.db?synchronous=FULL", "sqlite:///events.db?synchronous=FULL"),
        ("memory://", "memory://"),
        ("postgresql://app@db/events", "postgresql://app@db/events"),
        (f"postgresql://app:{SECRET}@db:5432/events", "postgresql://app:***@db:5432/events"),
        (f"postgresql://:{SECRET}@db/events", "postgresql://:***@db/events"),
        (
            f"postgresql://app@db/events?sslmode=require&password={SECRET}&application_name=x",
            "postgresql://app@db/events?sslmode=require&password=***&application_name=x",
        ),
        (f"postgres://db/e?PassWord={SECRET}", "postgres://db/e?PassWord=***"),
        (f"postgres://db/e?sslpassword={SECRET}", "postgres://db/e?sslpassword=***"),
        (f"x://h/p?api_key={SECRET}&token={SECRET}#frag", "x://h/p?api_key=***&token=***#frag"),
        (f"x://h/p?client-secret={SECRET}", "x://h/p?client-secret=***"),
        (f"x://h/p?pwd={SECRET}&passwd={SECRET}", "x://h/p?pwd=***&passwd=***"),
        (f"x://h/p?auth={SECRET}&credentials={SECRET}", "x://h/p?auth=***&credentials=***"),
        (
            f"esdb://admin:{SECRET}@n1:2113,n2:2113?Tls=false&UserKeyFile=/k",
            "esdb://admin:***@n1:2113,n2:2113?Tls=false&UserKeyFile=***",
        ),
        # unescaped "/" and "@" in a password: hidden whole, not cut at the first one
        ("postgresql://app:pa/ss@wd@db/events", "postgresql://app:***@db/events"),
        ("postgresql://app:pa?ss#wd@db/events?x=1", "postgresql://app:***@db/events?x=1"),
        ("postgresql://app:pa#ss@db/events", "postgresql://app:***@db/events"),
        # an "@" in a parameter is not the user info's
        ("postgresql://db/e?application_name=a@b", "postgresql://db/e?application_name=a@b"),
        (
            "postgresql://u:pw@db/e?application_name=a@b",
            "postgresql://u:***@db/e?application_name=a@b",
        ),
        (
            f"host=db user=app password={SECRET} dbname=events",
            "host=db user=app password=*** dbname=events",
        ),
        (f"host=db password = '{SECRET} x' port=5", "host=db password=*** port=5"),
        ("events.db", "events.db"),
    ],
)
def test_redact_uri(uri: str, shown: str) -> None:
    assert redact_uri(uri) == shown


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("password", True),
        ("sslpassword", True),
        ("API_KEY", True),
        ("apikey", True),
        ("access-token", True),
        ("pwd", True),
        ("sslmode", False),
        ("schema", False),
        ("application_name", False),
        ("host", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_redact_text_hides_raw_and_decoded_secrets() -> None:
    uri = "postgresql://u:p%40ss@h/db?token=t%2Fk"
    text = 'bad token "p%40ss", decoded p@ss; t%2Fk or t/k'
    assert redact_text(text, uri) == 'bad token "***", decoded ***; *** or ***'


@pytest.mark.parametrize(
    "uri",
    [
        f"ftp://user:{SECRET}@host/x",
        f"postgresql://u@127.0.0.1/db?password={SECRET}&bogus=1",
        f"postgresql://u:{SECRET}@127.0.0.1/db?schema=",
        f"postgresql://u:{SECRET}%ZZ@127.0.0.1/db",
        f"esdb://admin:{SECRET}@localhost:2113?Tls=maybe",
        f"esdb://admin:{SECRET}@localhost:2113?Tls=false&Bogus=1",
        f"memory://u:{SECRET}@x",
        f"sqlite://u:{SECRET}@host/e.db",
    ],
)
def test_uri_errors_never_show_the_password(uri: str) -> None:
    with pytest.raises(UnsupportedStoreURI) as raised:
        open_store(uri)
    error = raised.value
    for text in (str(error), repr(error), error.uri, error.reason):
        assert SECRET not in text
    assert "***" in error.uri


def test_store_reprs_never_show_the_password() -> None:
    store = open_store(f"esdb://admin:{SECRET}@localhost:1?Tls=false")  # connects lazily
    try:
        assert repr(store) == "EsdbEventStore('esdb://admin:***@localhost:1?Tls=false')"
    finally:
        store.close()
