"""Domain errors -> the RPC error catalogue, in one table.

Services raise domain errors (``telesrv.services.errors`` and the account errors);
the dispatcher turns each into the catalogue error the client is sent. A domain
error missing here is a bug: the dispatcher answers it as INTERNAL and logs it.
"""

from __future__ import annotations

from collections.abc import Callable

from telesrv.services import accounts, qr_login
from telesrv.services import errors as domain
from telesrv.services.contacts import PhoneLookupFlood
from telesrv.tl import errors as rpc
from telesrv.tl.rpcerror import RpcError

# Errors whose catalogue form carries no value.
_SIMPLE: dict[type[domain.DomainError], Callable[[], RpcError]] = {
    # messages
    domain.MessageEmpty: rpc.MessageEmpty,
    domain.MessageTooLong: rpc.MessageTooLong,
    domain.ReplyMessageIdInvalid: rpc.ReplyMessageIdInvalid,
    domain.MessageIdInvalid: rpc.MessageIdInvalid,
    domain.MessageAuthorRequired: rpc.MessageAuthorRequired,
    domain.MessageNotModified: rpc.MessageNotModified,
    domain.EditMessagesForbidden: rpc.EditMessagesForbidden,
    domain.DeleteMessagesForbidden: rpc.DeleteMessagesForbidden,
    domain.ChatForwardsRestricted: rpc.ChatForwardsRestricted,
    domain.LimitInvalid: rpc.LimitInvalid,
    domain.MessageIdsEmpty: rpc.MessageIdsEmpty,
    domain.MessageNotReadYet: rpc.MessageNotReadYet,
    domain.RandomIdDuplicate: rpc.RandomIdDuplicate,
    domain.RandomIdInvalid: rpc.RandomIdInvalid,
    domain.SearchQueryEmpty: rpc.SearchQueryEmpty,
    domain.YouBlockedUser: rpc.YouBlockedUser,
    domain.ReactionInvalid: rpc.ReactionInvalid,
    domain.PremiumAccountRequired: rpc.PremiumAccountRequired,
    # the chat list
    domain.PeerIdInvalid: rpc.PeerIdInvalid,
    domain.PeerHistoryEmpty: rpc.PeerHistoryEmpty,
    domain.FolderIdInvalid: rpc.FolderIdInvalid,
    domain.PinnedDialogsTooMuch: rpc.PinnedDialogsTooMuch,
    domain.FilterIdInvalid: rpc.FilterIdInvalid,
    domain.FilterTitleEmpty: rpc.FilterTitleEmpty,
    domain.FilterIncludeEmpty: rpc.FilterIncludeEmpty,
    domain.FilterIncludeTooMuch: rpc.FilterIncludeTooMuch,
    domain.ChatlistExcludeInvalid: rpc.ChatlistExcludeInvalid,
    domain.DialogFiltersTooMuch: rpc.DialogFiltersTooMuch,
    # uploads and downloads
    domain.OffsetInvalid: rpc.OffsetInvalid,
    domain.FileIdInvalid: rpc.FileIdInvalid,
    domain.FileReferenceEmpty: rpc.FileReferenceEmpty,
    domain.FileReferenceExpired: rpc.FileReferenceExpired,
    domain.LocationInvalid: rpc.LocationInvalid,
    domain.FilePartEmpty: rpc.FilePartEmpty,
    domain.FilePartInvalid: rpc.FilePartInvalid,
    domain.FilePartsInvalid: rpc.FilePartsInvalid,
    domain.FilePartTooBig: rpc.FilePartTooBig,
    domain.FilePartSizeInvalid: rpc.FilePartSizeInvalid,
    domain.FilePartSizeChanged: rpc.FilePartSizeChanged,
    domain.Md5ChecksumInvalid: rpc.Md5ChecksumInvalid,
    domain.ImageProcessFailed: rpc.ImageProcessFailed,
    domain.PhotoInvalidDimensions: rpc.PhotoInvalidDimensions,
    domain.MediaInvalid: rpc.MediaInvalid,
    domain.MediaCaptionTooLong: rpc.MediaCaptionTooLong,
    domain.MediaEmpty: rpc.MediaEmpty,
    domain.MultiMediaTooLong: rpc.MultiMediaTooLong,
    # accounts, login, contacts
    accounts.PhoneNumberInvalid: rpc.PhoneNumberInvalid,
    accounts.PhoneCodeEmpty: rpc.PhoneCodeEmpty,
    accounts.PhoneCodeHashEmpty: rpc.PhoneCodeHashEmpty,
    accounts.PhoneCodeInvalid: rpc.PhoneCodeInvalid,
    accounts.PhoneCodeExpired: rpc.PhoneCodeExpired,
    accounts.PhoneNumberOccupied: rpc.PhoneNumberOccupied,
    accounts.PhoneNumberUnoccupied: rpc.PhoneNumberUnoccupied,
    accounts.PhoneNotOccupied: rpc.PhoneNotOccupied,
    accounts.FirstNameInvalid: rpc.FirstnameInvalid,
    accounts.LastNameInvalid: rpc.LastnameInvalid,
    accounts.AboutTooLong: rpc.AboutTooLong,
    accounts.UsernameInvalid: rpc.UsernameInvalid,
    accounts.UsernameOccupied: rpc.UsernameOccupied,
    accounts.UsernameNotModified: rpc.UsernameNotModified,
    accounts.UsernameNotOccupied: rpc.UsernameNotOccupied,
    accounts.UserNotFound: rpc.UserIdInvalid,
    accounts.ContactIdInvalid: rpc.ContactIdInvalid,
    accounts.AuthorizationNotFound: rpc.HashInvalid,
    accounts.PhoneNumberBanned: rpc.PhoneNumberBanned,
    # login by QR code
    qr_login.AuthTokenInvalid: rpc.AuthTokenInvalid,
    qr_login.AuthTokenExpired: rpc.AuthTokenExpired,
    qr_login.AuthTokenAlreadyAccepted: rpc.AuthTokenAlreadyAccepted,
    qr_login.AuthTokenException: rpc.AuthTokenException,
}


def to_rpc_error(exc: domain.DomainError) -> RpcError:
    """The catalogue error for a domain error; KeyError for one this table lacks."""
    if isinstance(exc, domain.FloodWait):
        return rpc.FloodWait(exc.seconds)
    if isinstance(exc, domain.FilePartMissing):
        return rpc.FilePartMissing(exc.part)
    if isinstance(exc, accounts.SendCodeFlood | PhoneLookupFlood):
        return rpc.FloodWait(exc.retry_after)
    return _SIMPLE[type(exc)]()
