"""The verbs stack's markers (a plugin module, loaded by the verbs plugin's pytest_plugins):
`@pytest.mark.verbs_not_on("iwarp", reason=...)` declares that an item cannot run on a kind
of device, `@pytest.mark.verbs_needs("atomics")` that it needs a capability the device may
lack (skipped there, naming the device attribute that says so). What the device is and has
is known once the item's pair has opened it, so the item skips after its fixtures are up
(where a fixture of its own would have skipped); the forecast (skips.foreseen) foresees the
kind's skip from the fabric kind. Standard pytest only: the plugin loads this at startup, the
driver side only when a fixture needs it."""

from __future__ import annotations

from collections.abc import Generator

import pytest

NOT_ON_MARK = "verbs_not_on"
NOT_ON_LINE = (
    f"{NOT_ON_MARK}(*kinds, reason=...): a verbs item that cannot run on these kinds of "
    "device (iwarp: an iWARP device, e.g. siw); skipped there with `reason` once its pair "
    "has opened the device (the item must use verbs_pair)"
)
DEVICE_KINDS = ("iwarp",)
NEEDS_MARK = "verbs_needs"
NEEDS_LINE = (
    f"{NEEDS_MARK}(*capabilities): a verbs item that needs these capabilities of the device "
    "(atomics: atomic_cap not NONE); skipped where the opened device lacks one, naming the "
    "attribute (the item must use verbs_pair)"
)


def _lacks_atomics(info: dict[str, object]) -> str | None:
    if info.get("atomic_cap"):
        return None
    return f"{info.get('device')} has no atomics (atomic_cap = NONE)"


# capability -> why the device (the pair's info) lacks it, or None
CAPABILITIES = {"atomics": _lacks_atomics}


def device_kinds(iwarp: bool) -> set[str]:
    """The kinds (of DEVICE_KINDS) a device is: {"iwarp"} for an iWARP one."""
    return {"iwarp"} if iwarp else set()


def check_not_on(item: pytest.Item) -> None:
    """A verbs_not_on marker that names no known kind, gives no reason, or sits on an item
    without the pair that tells the device's kind is a usage error: it would never skip."""
    for mark in item.iter_markers(NOT_ON_MARK):
        problem = None
        if not mark.args or any(k not in DEVICE_KINDS for k in mark.args):
            problem = f"kinds are {', '.join(DEVICE_KINDS)}"
        elif not isinstance(mark.kwargs.get("reason"), str) or not mark.kwargs["reason"]:
            problem = "reason= is missing"
        elif "verbs_pair" not in getattr(item, "fixturenames", ()):
            problem = "the item uses no verbs_pair, which tells the device's kind"
        if problem:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{NOT_ON_MARK}{mark.args!r}: {problem}"
            )
    for mark in item.iter_markers(NEEDS_MARK):
        if not mark.args or any(c not in CAPABILITIES for c in mark.args):
            problem = f"capabilities are {', '.join(CAPABILITIES)}"
        elif "verbs_pair" not in getattr(item, "fixturenames", ()):
            problem = "the item uses no verbs_pair, which tells the device's capabilities"
        else:
            continue
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{NEEDS_MARK}{mark.args!r}: {problem}")


def not_on_reason(item: pytest.Item, kinds: set[str]) -> str | None:
    """The verbs_not_on skip of an item on a device of `kinds`, or None."""
    for mark in item.iter_markers(NOT_ON_MARK):
        if kinds.intersection(mark.args):
            return str(mark.kwargs["reason"])
    return None


def needs_reason(item: pytest.Item, info: dict[str, object]) -> str | None:
    """The verbs_needs skip of an item on a device whose attributes are `info`, or None."""
    for mark in item.iter_markers(NEEDS_MARK):
        for capability in mark.args:
            why = CAPABILITIES[capability](info)
            if why:
                return why
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", NOT_ON_LINE)
    config.addinivalue_line("markers", NEEDS_LINE)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        check_not_on(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Once the item's fixtures are up, its verbs_pair has opened the device: an item
    declared verbs_not_on that device's kind skips with its marker's reason, one that
    verbs_needs a capability the device lacks with the attribute that says so."""
    yield
    pair = getattr(item, "funcargs", {}).get("verbs_pair")
    if pair is not None:
        reason = not_on_reason(item, device_kinds(bool(pair.iwarp)))
        if reason is None and item.get_closest_marker(NEEDS_MARK) is not None:
            reason = needs_reason(item, dict(pair.info))
        if reason:
            # reported at the item, as pytest reports a skip raised in one of its fixtures
            raise pytest.skip.Exception(reason, _use_item_location=True)
