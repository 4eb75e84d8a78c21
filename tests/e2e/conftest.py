"""The `e2e` marker: tests that drive a real VS Code (code-server + headless Chromium).

They need what `bash scripts/e2e-setup.sh` installs and run only when selected with `-m e2e`
(`bash scripts/e2e-setup.sh && pytest -m e2e tests/e2e`); in any other run they are skipped, so
a plain `pytest` never starts a browser.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e: drives a real VS Code in headless Chromium (needs scripts/e2e-setup.sh); "
        "run with -m e2e",
    )


def _selects_e2e(markexpr: str) -> bool:
    """True when -m asks for e2e tests (`e2e`, `e2e or slow`), not when it excludes them."""
    expr = " ".join(markexpr.split())
    return "e2e" in expr and "not e2e" not in expr


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _selects_e2e(config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(
        reason="drives a real VS Code: bash scripts/e2e-setup.sh && pytest -m e2e tests/e2e"
    )
    for item in items:
        if item.get_closest_marker("e2e"):
            item.add_marker(skip)
