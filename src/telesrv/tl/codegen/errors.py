"""The generator of ``_generated/errors.py``: the RPC error catalogue as classes."""

from __future__ import annotations

from telesrv.tl.codegen.names import HEADER, pascal
from telesrv.tl.rpcerror import ErrorSpec

_X_PARAMS = {"WAIT": "seconds", "MIGRATE": "dc"}


def errors_module(specs: list[ErrorSpec]) -> str:
    """One RpcError subclass per catalogue row, plus a lookup by wire name."""
    lines = [HEADER, "# ruff: noqa", "from telesrv.tl.rpcerror import RpcError", ""]
    names = []
    for spec in specs:
        templ = spec.name
        # The placeholder ends the name (FLOOD_WAIT_X) or sits inside it (FILE_PART_X_MISSING).
        has_value = templ.endswith("_X") or "_X_" in templ
        if templ.endswith("_X"):
            base = templ[:-2]
        else:
            base = templ.replace("_X_", "_", 1)
        cls = pascal(base.lower())
        names.append((cls, templ))
        lines += ["", f"class {cls}(RpcError):"]
        lines.append(f"    CODE = {spec.code}")
        lines.append(f"    TEMPLATE = {templ!r}")
        lines.append(f"    DESCRIPTION = {spec.description!r}")
        if has_value:
            kind = base.rsplit("_", 1)[-1] if templ.endswith("_X") else ""
            param = _X_PARAMS.get(kind, "value")
            lines.append(f"    def __init__(self, {param}: 'int | str') -> None:")
            if param != "value":
                lines.append(f"        self.{param} = {param}")
            lines.append(f"        super().__init__({param})")
        else:
            lines.append("    def __init__(self) -> None:")
            lines.append("        super().__init__()")
        lines.append("")
    lines.append("")
    lines.append("BY_TEMPLATE: dict[str, type[RpcError]] = {")
    lines += [f"    {templ!r}: {cls}," for cls, templ in names]
    lines.append("}")
    lines.append("__all__ = [" + ", ".join(repr(c) for c, _ in names) + ", 'BY_TEMPLATE']")
    return "\n".join(lines) + "\n"
