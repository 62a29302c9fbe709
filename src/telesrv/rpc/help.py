"""What clients call at start-up: help.*, langpack.*."""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from telesrv.rpc.context import RequestContext
from telesrv.rpc.registry import method
from telesrv.services.dialog_filters import MAX_FILTER_CHATS, MAX_FILTERS
from telesrv.services.dialogs import ARCHIVE, PINNED_LIMITS
from telesrv.services.reactions import DEFAULT_REACTION, MAX_REACTIONS_PER_USER
from telesrv.tl import TLObject, functions, types

THIS_DC = 2  # what the README tells clients to use with session.set_dc(2, ...)
MESSAGE_LENGTH_MAX = 4096
CAPTION_LENGTH_MAX = 1024
QUOTE_LENGTH_MAX = 1024
FORWARDED_COUNT_MAX = 100
CONFIG_TTL = 3600


@dataclass
class ServerAddress:
    """Where clients reach this server (dc_options); the port is filled in after binding."""

    host: str
    port: int


def _is_ipv6(host: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address)
    except ValueError:
        return False


def _json(value: object) -> types.TypeJSONValue:
    if isinstance(value, bool):
        return types.JsonBool(value=value)
    if isinstance(value, int | float):
        return types.JsonNumber(value=float(value))
    if isinstance(value, str):
        return types.JsonString(value=value)
    if isinstance(value, dict):
        return types.JsonObject(
            value=[types.JsonObjectValue(key=k, value=_json(v)) for k, v in value.items()]
        )
    if isinstance(value, list):
        return types.JsonArray(value=[_json(v) for v in value])
    return types.JsonNull()


# The limits clients should check before sending, as Telegram publishes them in appConfig.
APP_CONFIG: dict[str, object] = {
    "quote_length_max": QUOTE_LENGTH_MAX,
    "message_length_max": MESSAGE_LENGTH_MAX,
    "forwarded_count_max": FORWARDED_COUNT_MAX,
    # Reactions: distinct ones per message, and per user per message (one for every
    # account: no Premium here).
    "reactions_uniq_max": 11,
    "reactions_user_max_default": MAX_REACTIONS_PER_USER,
    "reactions_user_max_premium": MAX_REACTIONS_PER_USER,
    # The chat list's limits are the same with or without Premium (there is none here),
    # so clients neither offer more than the server takes nor ask for an upgrade.
    "dialogs_pinned_limit_default": PINNED_LIMITS[0],
    "dialogs_pinned_limit_premium": PINNED_LIMITS[0],
    "dialogs_folder_pinned_limit_default": PINNED_LIMITS[ARCHIVE],
    "dialogs_folder_pinned_limit_premium": PINNED_LIMITS[ARCHIVE],
    "dialog_filters_limit_default": MAX_FILTERS,
    "dialog_filters_limit_premium": MAX_FILTERS,
    "dialog_filters_chats_limit_default": MAX_FILTER_CHATS,
    "dialog_filters_chats_limit_premium": MAX_FILTER_CHATS,
    "stories_all_hidden": True,
}
_APP_CONFIG_HASH = zlib.crc32(repr(sorted(APP_CONFIG.items())).encode()) & 0x7FFFFFFF


# user id -> the emoticon of their double-tap reaction
DefaultReaction = Callable[[int], Awaitable[str]]


class HelpHandlers:
    def __init__(
        self, address: ServerAddress, default_reaction: DefaultReaction | None = None
    ) -> None:
        self._address = address
        self._default_reaction = default_reaction

    def dc_options(self) -> list[types.DcOption]:
        return [
            types.DcOption(
                id=THIS_DC,
                ip_address=self._address.host,
                port=self._address.port,
                ipv6=_is_ipv6(self._address.host),
            )
        ]

    @method(functions.help.GetConfig, requires_auth=False)
    async def get_config(self, ctx: RequestContext, req: functions.help.GetConfig) -> TLObject:
        now = int(ctx.now)
        reaction = DEFAULT_REACTION
        if self._default_reaction is not None and ctx.user_id is not None:
            reaction = await self._default_reaction(ctx.user_id)
        return types.Config(
            date=now,
            expires=now + CONFIG_TTL,
            test_mode=False,
            this_dc=THIS_DC,
            dc_options=self.dc_options(),
            dc_txt_domain_name="",
            chat_size_max=200,
            megagroup_size_max=200_000,
            forwarded_count_max=FORWARDED_COUNT_MAX,
            online_update_period_ms=210_000,
            offline_blur_timeout_ms=5_000,
            offline_idle_timeout_ms=30_000,
            online_cloud_timeout_ms=300_000,
            notify_cloud_delay_ms=30_000,
            notify_default_delay_ms=1_500,
            push_chat_period_ms=60_000,
            push_chat_limit=2,
            edit_time_limit=172_800,
            revoke_time_limit=2_147_483_647,
            revoke_pm_time_limit=2_147_483_647,
            rating_e_decay=2_419_200,
            stickers_recent_limit=200,
            channels_read_media_period=604_800,
            call_receive_timeout_ms=20_000,
            call_ring_timeout_ms=90_000,
            call_connect_timeout_ms=30_000,
            call_packet_timeout_ms=10_000,
            me_url_prefix="https://t.me/",
            caption_length_max=CAPTION_LENGTH_MAX,
            message_length_max=MESSAGE_LENGTH_MAX,
            webfile_dc_id=THIS_DC,
            reactions_default=types.ReactionEmoji(emoticon=reaction),
        )

    @method(functions.help.GetNearestDc, requires_auth=False)
    async def get_nearest_dc(
        self, ctx: RequestContext, req: functions.help.GetNearestDc
    ) -> TLObject:
        return types.NearestDc(country="", this_dc=THIS_DC, nearest_dc=THIS_DC)

    @method(functions.help.GetAppConfig, requires_auth=False)
    async def get_app_config(
        self, ctx: RequestContext, req: functions.help.GetAppConfig
    ) -> TLObject:
        assert isinstance(req, functions.help.GetAppConfig)
        if req.hash == _APP_CONFIG_HASH:
            return types.help.AppConfigNotModified()
        return types.help.AppConfig(hash=_APP_CONFIG_HASH, config=_json(APP_CONFIG))

    @method(functions.help.GetCountriesList, requires_auth=False)
    async def get_countries_list(
        self, ctx: RequestContext, req: functions.help.GetCountriesList
    ) -> TLObject:
        # No phone-number metadata is shipped; clients accept an empty list.
        return types.help.CountriesList(countries=[], hash=0)

    @method(functions.help.GetTermsOfServiceUpdate, requires_auth=False)
    async def get_terms_of_service_update(
        self, ctx: RequestContext, req: functions.help.GetTermsOfServiceUpdate
    ) -> TLObject:
        return types.help.TermsOfServiceUpdateEmpty(expires=int(ctx.now) + 86_400)

    @method(functions.help.GetPromoData, requires_auth=False)
    async def get_promo_data(
        self, ctx: RequestContext, req: functions.help.GetPromoData
    ) -> TLObject:
        return types.help.PromoDataEmpty(expires=int(ctx.now) + CONFIG_TTL)

    @method(functions.help.GetAppUpdate, requires_auth=False)
    async def get_app_update(
        self, ctx: RequestContext, req: functions.help.GetAppUpdate
    ) -> TLObject:
        return types.help.NoAppUpdate()

    @method(functions.help.GetCdnConfig, requires_auth=False)
    async def get_cdn_config(
        self, ctx: RequestContext, req: functions.help.GetCdnConfig
    ) -> TLObject:
        return types.CdnConfig(public_keys=[])

    @method(functions.help.GetPeerColors, requires_auth=False)
    async def get_peer_colors(
        self, ctx: RequestContext, req: functions.help.GetPeerColors
    ) -> TLObject:
        return types.help.PeerColors(hash=0, colors=[])

    @method(functions.help.GetPeerProfileColors, requires_auth=False)
    async def get_peer_profile_colors(
        self, ctx: RequestContext, req: functions.help.GetPeerProfileColors
    ) -> TLObject:
        return types.help.PeerColors(hash=0, colors=[])


def _english() -> TLObject:
    return types.LangPackLanguage(
        name="English",
        native_name="English",
        lang_code="en",
        plural_code="en",
        strings_count=0,
        translated_count=0,
        translations_url="",
        official=True,
    )


class LangpackHandlers:
    """No translations are served: clients fall back to their built-in strings."""

    @method(functions.langpack.GetLangPack, requires_auth=False)
    async def get_lang_pack(
        self, ctx: RequestContext, req: functions.langpack.GetLangPack
    ) -> TLObject:
        assert isinstance(req, functions.langpack.GetLangPack)
        return types.LangPackDifference(
            lang_code=req.lang_code[:16], from_version=0, version=0, strings=[]
        )

    @method(functions.langpack.GetDifference, requires_auth=False)
    async def get_difference(
        self, ctx: RequestContext, req: functions.langpack.GetDifference
    ) -> TLObject:
        assert isinstance(req, functions.langpack.GetDifference)
        return types.LangPackDifference(
            lang_code=req.lang_code[:16], from_version=req.from_version, version=0, strings=[]
        )

    @method(functions.langpack.GetStrings, requires_auth=False)
    async def get_strings(
        self, ctx: RequestContext, req: functions.langpack.GetStrings
    ) -> list[TLObject]:
        return []

    @method(functions.langpack.GetLanguages, requires_auth=False)
    async def get_languages(
        self, ctx: RequestContext, req: functions.langpack.GetLanguages
    ) -> list[TLObject]:
        return [_english()]

    @method(functions.langpack.GetLanguage, requires_auth=False)
    async def get_language(
        self, ctx: RequestContext, req: functions.langpack.GetLanguage
    ) -> TLObject:
        return _english()
