"""Privacy keys and rules as TL, both ways, and the updatePrivacy a change becomes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from telesrv.services.privacy import PrivacyKey, Rule, RuleKind, rule_user_ids
from telesrv.services.update_log import EventType, UpdateEvent, log_payloads
from telesrv.tl import types
from telesrv.tl.errors import PrivacyKeyInvalid, PrivacyValueInvalid

Rendered = tuple["types.TypeUpdate", set[int]]

_KEYS_IN: dict[type, PrivacyKey] = {
    types.InputPrivacyKeyStatusTimestamp: PrivacyKey.STATUS_TIMESTAMP,
    types.InputPrivacyKeyPhoneNumber: PrivacyKey.PHONE_NUMBER,
    types.InputPrivacyKeyProfilePhoto: PrivacyKey.PROFILE_PHOTO,
    types.InputPrivacyKeyForwards: PrivacyKey.FORWARDS,
    types.InputPrivacyKeyAbout: PrivacyKey.ABOUT,
    types.InputPrivacyKeyAddedByPhone: PrivacyKey.ADDED_BY_PHONE,
    types.InputPrivacyKeyPhoneCall: PrivacyKey.PHONE_CALL,
    types.InputPrivacyKeyPhoneP2P: PrivacyKey.PHONE_P2P,
    types.InputPrivacyKeyChatInvite: PrivacyKey.CHAT_INVITE,
    types.InputPrivacyKeyVoiceMessages: PrivacyKey.VOICE_MESSAGES,
    types.InputPrivacyKeyBirthday: PrivacyKey.BIRTHDAY,
}

_KEYS_OUT: dict[PrivacyKey, Callable[[], types.TypePrivacyKey]] = {
    PrivacyKey.STATUS_TIMESTAMP: types.PrivacyKeyStatusTimestamp,
    PrivacyKey.PHONE_NUMBER: types.PrivacyKeyPhoneNumber,
    PrivacyKey.PROFILE_PHOTO: types.PrivacyKeyProfilePhoto,
    PrivacyKey.FORWARDS: types.PrivacyKeyForwards,
    PrivacyKey.ABOUT: types.PrivacyKeyAbout,
    PrivacyKey.ADDED_BY_PHONE: types.PrivacyKeyAddedByPhone,
    PrivacyKey.PHONE_CALL: types.PrivacyKeyPhoneCall,
    PrivacyKey.PHONE_P2P: types.PrivacyKeyPhoneP2P,
    PrivacyKey.CHAT_INVITE: types.PrivacyKeyChatInvite,
    PrivacyKey.VOICE_MESSAGES: types.PrivacyKeyVoiceMessages,
    PrivacyKey.BIRTHDAY: types.PrivacyKeyBirthday,
}

# Rules without users, each way.
_PLAIN_IN: dict[type, RuleKind] = {
    types.InputPrivacyValueAllowAll: RuleKind.ALLOW_ALL,
    types.InputPrivacyValueAllowContacts: RuleKind.ALLOW_CONTACTS,
    types.InputPrivacyValueDisallowAll: RuleKind.DISALLOW_ALL,
    types.InputPrivacyValueDisallowContacts: RuleKind.DISALLOW_CONTACTS,
}
_RULES_OUT: dict[RuleKind, Callable[[Rule], types.TypePrivacyRule]] = {
    RuleKind.ALLOW_ALL: lambda r: types.PrivacyValueAllowAll(),
    RuleKind.ALLOW_CONTACTS: lambda r: types.PrivacyValueAllowContacts(),
    RuleKind.DISALLOW_ALL: lambda r: types.PrivacyValueDisallowAll(),
    RuleKind.DISALLOW_CONTACTS: lambda r: types.PrivacyValueDisallowContacts(),
    RuleKind.ALLOW_USERS: lambda r: types.PrivacyValueAllowUsers(users=list(r.users)),
    RuleKind.DISALLOW_USERS: lambda r: types.PrivacyValueDisallowUsers(users=list(r.users)),
}


def key_from_tl(key: types.TypeInputPrivacyKey) -> PrivacyKey:
    found = _KEYS_IN.get(type(key))
    if found is None:
        raise PrivacyKeyInvalid()
    return found


def key_to_tl(key: PrivacyKey) -> types.TypePrivacyKey:
    return _KEYS_OUT[key]()


def rule_kind(rule: types.TypeInputPrivacyRule) -> tuple[RuleKind, list[types.TypeInputUser]]:
    """The kind of an input rule and the InputUsers it names (to be resolved); close
    friends, premium, bots and chat participants are refused."""
    plain = _PLAIN_IN.get(type(rule))
    if plain is not None:
        return plain, []
    if isinstance(rule, types.InputPrivacyValueAllowUsers):
        return RuleKind.ALLOW_USERS, list(rule.users)
    if isinstance(rule, types.InputPrivacyValueDisallowUsers):
        return RuleKind.DISALLOW_USERS, list(rule.users)
    raise PrivacyValueInvalid()


def rules_to_tl(rules: Sequence[Rule]) -> list[types.TypePrivacyRule]:
    return [_RULES_OUT[r.kind](r) for r in rules]


def _privacy(e: UpdateEvent) -> Rendered | None:
    p = log_payloads.PrivacyChanged.from_json(e.payload)
    try:
        key = PrivacyKey(p.key)
        rules = [Rule.from_json(r) for r in p.rules]
    except (ValueError, KeyError):
        return None  # written by a later version: nothing this one can say
    update = types.UpdatePrivacy(key=key_to_tl(key), rules=rules_to_tl(rules))
    return update, set(rule_user_ids(rules))


# Events of the state log (no pts).
STATE_EVENTS: dict[EventType, Callable[[UpdateEvent], Rendered | None]] = {
    EventType.PRIVACY: _privacy,
}
