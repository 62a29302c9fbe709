"""`python -m telesrv ...` runs the same command line as the `telesrv` script."""

from telesrv.cli import main

if __name__ == "__main__":
    main(prog_name="telesrv")
