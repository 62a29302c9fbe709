"""Running an operator command against the server's databases."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from telesrv.config import Settings


def admin_settings(data_dir: Path, database_url: str | None, redis_url: str | None) -> Settings:
    return Settings(
        data_dir=data_dir, database_url=database_url or None, redis_url=redis_url or None
    )


def run_admin(settings: Settings, job: Callable[[Any], Any]) -> Any:
    """Run ``job(db)`` against the server's database, whether the server runs or not
    (a running server's embedded PostgreSQL is shared with this process). A command
    serves no requests: its pool is not warmed (it would only take connections a
    running server may need)."""
    from telesrv import app

    async def main() -> Any:
        async with app.open_resources(settings, warm=False) as resources:
            return await job(resources.db)

    return app.run_async(main)


def account_error_text(exc: Exception) -> str:
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", type(exc).__name__).lower()
    return f"refused: {words}"


def run_admin_service(settings: Settings, job: Callable[[Any], Any]) -> Any:
    """Run ``job(admin)`` with the operator's service on the server's databases."""
    from telesrv import app
    from telesrv.services.admin import Admin
    from telesrv.services.errors import DomainError

    async def main() -> Any:
        async with app.open_resources(settings, warm=False) as resources:
            return await job(Admin(resources.db, resources.redis))

    try:
        return app.run_async(main)
    except DomainError as exc:
        raise click.ClickException(account_error_text(exc)) from None
