"""`telesrv key`: the server's public key."""

from __future__ import annotations

from pathlib import Path

import click

from telesrv.config import DEFAULT_DATA_DIR


@click.command("key")
@click.option(
    "--data-dir",
    envvar="TELESRV_DATA_DIR",
    show_envvar=True,
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DATA_DIR,
    show_default=True,
)
def key_command(data_dir: Path) -> None:
    """Print the server's public key and fingerprint (creating the key if needed)."""
    from telesrv.server_key import ServerKeyError, load_or_create_server_key

    try:
        server_key = load_or_create_server_key(data_dir)
    except ServerKeyError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"fingerprint: {server_key.fingerprint_hex}")
    click.echo(f"public key file: {server_key.public_key_path}")
    click.echo(server_key.public_pem, nl=False)
