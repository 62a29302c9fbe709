"""Refusals of the message services, as domain errors.

Services never speak the wire: they raise these, and the RPC layer turns each into
its catalogue error in one table (``telesrv.rpc.errors``). The classes carry the
name of the catalogue error they become, so a reader of a service sees at once what
the client is told.
"""

from __future__ import annotations

from telesrv.store.db import UNAVAILABLE_ERRORS as UNAVAILABLE_ERRORS

# UNAVAILABLE_ERRORS (re-exported for rpc, which may not import the store): what a
# request gets when PostgreSQL or Redis does not answer in time; answered as TIMEOUT.


class DomainError(Exception):
    """A refused operation; every subclass has one catalogue error in rpc."""


class FloodWait(DomainError):
    """Too many operations of this kind: retry after ``seconds``."""

    def __init__(self, seconds: int) -> None:
        super().__init__(seconds)
        self.seconds = seconds


class MessageEmpty(DomainError):
    """The text is empty (after trimming)."""


class MessageTooLong(DomainError):
    """The text or a quote is longer than allowed."""


class ReplyMessageIdInvalid(DomainError):
    """The message replied to does not exist in the chat."""


class MessageIdInvalid(DomainError):
    """A message id names no message of the caller's in this chat."""


class ReactionInvalid(DomainError):
    """Not one of the available emoji reactions (custom emoji and paid ones included)."""


class PremiumAccountRequired(DomainError):
    """Past a limit only Premium accounts may pass (more reactions on one message);
    there is no Premium here."""


class MessageAuthorRequired(DomainError):
    """Only the author may do this to the message."""


class MessageNotModified(DomainError):
    """The edit changes nothing."""


class EditMessagesForbidden(DomainError):
    """The message can no longer be edited."""


class DeleteMessagesForbidden(DomainError):
    """The message can no longer be deleted for both sides."""


class ChatForwardsRestricted(DomainError):
    """The message is protected from forwarding."""


class LimitInvalid(DomainError):
    """Too many ids in one call."""


class MessageIdsEmpty(DomainError):
    """No message ids given."""


class MessageNotReadYet(DomainError):
    """The peer has not read the message yet."""


class RandomIdDuplicate(DomainError):
    """A random id given twice in one call."""


class RandomIdInvalid(DomainError):
    """The random ids do not pair up one to one with the message ids."""


class SearchQueryEmpty(DomainError):
    """Nothing to search by: no text, chat or author."""


class YouBlockedUser(DomainError):
    """The sender blocked the recipient: unblock them to write to them."""


# The chat list: pins, folders and dialog filters.


class PeerIdInvalid(DomainError):
    """The peer names no chat the caller may use here."""


class PeerHistoryEmpty(DomainError):
    """The chat has no messages yet, so it is not in the chat list to pin."""


class FolderIdInvalid(DomainError):
    """No folder with this id (only the main list and the archive exist)."""


class PinnedDialogsTooMuch(DomainError):
    """The folder already holds as many pinned chats as allowed."""


class FilterIdInvalid(DomainError):
    """The dialog filter id is outside the allowed range or names no filter."""


class FilterTitleEmpty(DomainError):
    """A dialog filter needs a title."""


class FilterIncludeEmpty(DomainError):
    """A dialog filter that includes no chats and no chat types shows nothing."""


class FilterIncludeTooMuch(DomainError):
    """A dialog filter lists more chats than allowed."""


class ChatlistExcludeInvalid(DomainError):
    """A chat is both included in and excluded from a dialog filter."""


class DialogFiltersTooMuch(DomainError):
    """The user already has as many dialog filters as allowed."""


# -- uploads, photos, documents, downloads ------------------------------------------


class OffsetInvalid(DomainError):
    """A download offset breaks the alignment rules or is negative."""


class FileIdInvalid(DomainError):
    """No file with this id (and access hash) that the caller may use."""


class FileReferenceEmpty(DomainError):
    """A file named by id and access hash without its file reference."""


class FileReferenceExpired(DomainError):
    """The file reference is not the object's current one: fetch the object again."""


class LocationInvalid(DomainError):
    """The file has no such rendition (thumb size)."""


class FilePartEmpty(DomainError):
    """An uploaded part has no bytes."""


class FilePartInvalid(DomainError):
    """The part number is outside the file."""


class FilePartsInvalid(DomainError):
    """The number of parts is out of range or not the one given before."""


class FilePartTooBig(DomainError):
    """A part is larger than the largest part size."""


class FilePartSizeInvalid(DomainError):
    """A part (not the last) has a size other than a power-of-two KiB up to the maximum."""


class FilePartSizeChanged(DomainError):
    """The parts of one file do not all have the same size (except a smaller last one)."""


class FilePartMissing(DomainError):
    """Part ``part`` of the file was never uploaded."""

    def __init__(self, part: int) -> None:
        super().__init__(part)
        self.part = part


class Md5ChecksumInvalid(DomainError):
    """The file's MD5 is not the one the client named."""


class ImageProcessFailed(DomainError):
    """The file is not an image that can be decoded."""


class PhotoInvalidDimensions(DomainError):
    """The image is too large or too narrow to be a photo."""


class MediaInvalid(DomainError):
    """This kind of media cannot be used here."""


class MediaCaptionTooLong(DomainError):
    """A media caption is longer than Telegram's caption limit."""


class MediaEmpty(DomainError):
    """The media named cannot be sent (no file, or of a kind that is never sent)."""


class MultiMediaTooLong(DomainError):
    """An album has more items than allowed."""
