"""Provider info (`mirrorbook.airflow.provider`) names every module of operators, sensors, triggers and hooks
the package has, the notifier, and a `kafka_connect` connection type whose form fields are what the hook reads.

Found by walking the packages, so a new operator module that is not listed fails here."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from airflow.sdk import BaseHook, BaseNotifier, BaseOperator, BaseSensorOperator
from airflow.triggers.base import BaseTrigger

from mirrorbook.airflow.provider import CONNECT_CONN_TYPE, get_provider_info

INFO = get_provider_info()


def _listed(section: str) -> set[str]:
    return {m for entry in INFO[section] for m in entry["python-modules"]}


def _operator(cls: type) -> bool:
    """An operator a DAG can use: it does work of its own (a base class only shares code)."""
    return (not issubclass(cls, BaseSensorOperator) and not cls.__name__.startswith("_")
            and cls.execute is not BaseOperator.execute)


def _sensor(cls: type) -> bool:
    return not cls.__name__.startswith("_") and cls.poke is not BaseSensorOperator.poke


def _defining(package: str, base: type, keep=lambda cls: True) -> set[str]:
    """The modules of `package` that define (not only import) a subclass of `base`."""
    pkg = importlib.import_module(package)
    found = set()
    for info in pkgutil.iter_modules(pkg.__path__, f"{package}."):
        module = importlib.import_module(info.name)
        if any(issubclass(c, base) and c.__module__ == info.name and keep(c)
               for c in vars(module).values() if inspect.isclass(c)):
            found.add(info.name)
    return found


@pytest.mark.parametrize("section, package, base, keep", [
    ("operators", "mirrorbook.airflow.operators", BaseOperator, _operator),
    ("sensors", "mirrorbook.airflow.sensors", BaseSensorOperator, _sensor),
    ("triggers", "mirrorbook.airflow.triggers", BaseTrigger, lambda c: True),
    ("hooks", "mirrorbook.airflow.hooks", BaseHook, lambda c: True),
])
def test_every_module_that_defines_one_is_listed(section, package, base, keep):
    defined = _defining(package, base, keep)
    assert defined, f"no {section} found in {package}: the walk is broken"
    assert _listed(section) == defined


def test_the_shared_base_is_not_an_operator_module():
    assert "mirrorbook.airflow.operators.base" not in _defining("mirrorbook.airflow.operators", BaseOperator, _operator)
    assert "mirrorbook.airflow.operators.base" in _defining("mirrorbook.airflow.operators", BaseOperator)


def test_the_notifier_is_listed_by_its_class():
    for path in INFO["notifications"]:
        module, _, name = path.rpartition(".")
        assert issubclass(getattr(importlib.import_module(module), name), BaseNotifier)


def test_the_connection_type_is_the_hooks_and_its_form_fields_are_what_the_hook_reads():
    from airflow.models.connection import Connection

    from mirrorbook.airflow.hooks.connect import settings_from_connection
    from mirrorbook.connect import ConnectSettings

    [conn_type] = INFO["connection-types"]
    module, _, name = conn_type["hook-class-name"].rpartition(".")
    hook = getattr(importlib.import_module(module), name)
    assert conn_type["connection-type"] == hook.conn_type == CONNECT_CONN_TYPE
    assert conn_type["hook-name"] == hook.hook_name
    values = {"use_tls": True, "verify": "/etc/ssl/ca.pem", "client_cert": "/c.pem", "client_key": "/k.pem",
              "timeout": 12, "retry_deadline": 45}
    assert set(conn_type["conn-fields"]) == set(values)
    def built(conn: Connection) -> ConnectSettings:  # what the hook builds, the connection's name aside
        return settings_from_connection(conn).model_copy(update={"connection": None})

    plain = built(Connection(conn_id="p", conn_type=CONNECT_CONN_TYPE, host="h"))
    for field, value in values.items():  # each field, alone, changes what the hook builds
        one = built(Connection(conn_id="o", conn_type=CONNECT_CONN_TYPE, host="h", extra={field: value}))
        assert one != plain, field
    # the form stores its fields with Airflow's prefix: read the same way
    prefixed = built(Connection(conn_id="x", conn_type=CONNECT_CONN_TYPE, host="h", extra={
        f"extra__{CONNECT_CONN_TYPE}__{k}": v for k, v in values.items()}))
    assert prefixed == built(Connection(conn_id="y", conn_type=CONNECT_CONN_TYPE, host="h", extra=values))
