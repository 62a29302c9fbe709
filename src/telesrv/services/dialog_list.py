"""The dialog list's row, as rpc renders it (the listing itself is the chat list's
``DialogService``)."""

from __future__ import annotations

from telesrv.store import dialog_list as dialog_list_store

DialogRow = dialog_list_store.DialogRow
