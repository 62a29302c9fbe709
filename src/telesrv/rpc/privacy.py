"""Account-wide content and privacy settings that this server does not let an account
change: each answer is the default Telegram gives an account that never set it."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.registry import method
from telesrv.tl import TLObject, functions, types


class PrivacyHandlers:
    @method(functions.account.GetContentSettings)
    async def get_content_settings(
        self, ctx: AuthedContext, req: functions.account.GetContentSettings
    ) -> TLObject:
        # Sensitive content off, and not offered as a switch: account.setContentSettings
        # is not served, so a client must not show a toggle that cannot work.
        return types.account.ContentSettings(sensitive_enabled=False, sensitive_can_change=False)

    @method(functions.account.GetGlobalPrivacySettings)
    async def get_global_privacy_settings(
        self, ctx: AuthedContext, req: functions.account.GetGlobalPrivacySettings
    ) -> TLObject:
        # Every flag off: new chats are neither archived nor muted, read marks are shown
        # (this server sends read receipts), and writing first costs nothing.
        return types.GlobalPrivacySettings()

    @method(functions.account.GetContactSignUpNotification)
    async def get_contact_sign_up_notification(
        self, ctx: AuthedContext, req: functions.account.GetContactSignUpNotification
    ) -> bool:
        # Whether the account is told when a contact joins: this server sends no such
        # service messages.
        return False
