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
    """Print the server's public key and fingerprint (creating the key if needed), also in
    the forms web clients take: the modulus and exponent in hex, the fingerprint as a
    signed decimal."""
    from telesrv.server_key import ServerKeyError, load_or_create_server_key

    try:
        server_key = load_or_create_server_key(data_dir)
    except ServerKeyError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"fingerprint: {server_key.fingerprint_hex}")
    # Web clients (Web K, Web A, GramJS, mtcute in a browser) take the key as numbers:
    # the modulus and exponent in hex (whole bytes, no 0x) and the fingerprint as the
    # signed 64-bit integer MTProto carries.
    click.echo(f"fingerprint (signed int64): {server_key.fingerprint}")
    click.echo(f"modulus (hex): {format(server_key.n, 'x')}")
    click.echo(f"exponent (hex): {_hex_bytes(server_key.e)}")
    click.echo(f"public key file: {server_key.public_key_path}")
    click.echo(server_key.public_pem, nl=False)


def _hex_bytes(value: int) -> str:
    """Whole bytes of lowercase hex, big-endian (65537 is 010001)."""
    return value.to_bytes((value.bit_length() + 7) // 8, "big").hex()
