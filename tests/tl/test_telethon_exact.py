"""Byte-exact agreement with Telethon 1.45 (layer 229), the reference client.

For a seeded corpus (one object per schema combinator Telethon knows, every
optional field on for each again, plus hand-written realistic objects) our bytes
equal Telethon's for the same object, our parser reads Telethon's bytes back into
an equal object, and Telethon's parser reads our bytes back into the same values.
"""

from __future__ import annotations

import io
import random
import struct
from datetime import datetime
from typing import Any

import pytest

pytest.importorskip("telethon")

from telethon.extensions import BinaryReader  # noqa: E402
from telethon.network.mtprotostate import MTProtoState  # noqa: E402
from telethon.tl import types as tt  # noqa: E402
from telethon.tl.alltlobjects import tlobjects  # noqa: E402
from telethon.tl.core import GzipPacked, MessageContainer, RpcResult  # noqa: E402

from telesrv.bench.tl import sample_message, sample_updates, sample_user, to_telethon  # noqa: E402
from telesrv.tl import CLASSES, TLObject, decode, functions, mt, service, types  # noqa: E402
from tl.tlgen import COMBINATORS, Builder, Source  # noqa: E402

# Ids in our schema (kurigram's layer-229 files plus the MTProto ones) that Telethon's
# schema does not have; everything else shares its id and field layout with Telethon.
NOT_IN_TELETHON = {
    0x8610BAEB: "msg_resend_ans_req",
    0x9A5F6E95: "contest.saveDeveloperInfo",
    0xF35C6D01: "rpc_result",  # Telethon handles it by hand (telethon.tl.core)
}

# Same id and layout, but Telethon's generated code disagrees with the schema text.
TELETHON_QUIRKS = {
    "channels.getMessageAuthor": "Telethon packs id:int unsigned (negative ids fail)",
}

_OUR_NAME = {"is_self": "self_"}
OUR_CLASSES: dict[int, type[TLObject]] = CLASSES


def from_telethon(value: Any) -> Any:
    """Our object with the values of a Telethon object (dates back to unix seconds)."""
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, list):
        return [from_telethon(v) for v in value]
    cid = getattr(value, "CONSTRUCTOR_ID", None)
    if cid is None:
        return value
    cls = OUR_CLASSES[cid]
    kwargs = {}
    for name, raw in vars(value).items():
        ours = _OUR_NAME.get(name, name)
        if ours in cls.FIELDS:
            kwargs[ours] = from_telethon(raw)
    return cls(**kwargs)


def without_empty_media(value: Any) -> Any:
    """Telethon's patched Message turns media=messageMediaEmpty into None when parsing."""
    if isinstance(value, list):
        return [without_empty_media(v) for v in value]
    if not isinstance(value, TLObject):
        return value
    kwargs = {f: without_empty_media(getattr(value, f)) for f in value.FIELDS}
    if isinstance(kwargs.get("media"), types.MessageMediaEmpty) and value.TL_NAME == "message":
        kwargs["media"] = None
    return type(value)(**kwargs)


def check_exact(obj: TLObject) -> None:
    ours = obj.to_bytes()
    theirs = bytes(to_telethon(obj))
    assert ours == theirs, f"{obj.TL_NAME}: bytes differ"
    assert decode(theirs) == obj, f"{obj.TL_NAME}: our parse of Telethon's bytes differs"
    parsed = BinaryReader(ours).tgread_object()
    assert from_telethon(parsed) == without_empty_media(obj), f"{obj.TL_NAME}: Telethon read"


def test_schema_ids_match_telethon() -> None:
    missing = {cid: cls.TL_NAME for cid, cls in OUR_CLASSES.items() if cid not in tlobjects}
    assert missing == NOT_IN_TELETHON


def generic_corpus() -> list[TLObject]:
    rng = random.Random(20240229)
    builder = Builder(Source(rng), max_depth=3, telethon_safe=True)
    corpus = []
    for all_present in (None, True):
        for c in COMBINATORS:
            if c.id not in NOT_IN_TELETHON and c.name not in TELETHON_QUIRKS:
                corpus.append(builder.build(c, all_present=all_present))
    return corpus


def test_generic_corpus_is_byte_exact() -> None:
    corpus = generic_corpus()
    assert len(corpus) >= 200
    failures = []
    for obj in corpus:
        try:
            check_exact(obj)
        except (AssertionError, struct.error, TypeError, ValueError) as e:
            if not isinstance(e, AssertionError):
                e = AssertionError(f"{obj.TL_NAME}: {type(e).__name__}: {e}")
            failures.append(str(e).splitlines()[0])
    assert not failures, failures[:20]


def realistic_corpus() -> dict[str, TLObject]:
    peer = types.PeerUser(user_id=5_000_000_777)
    user = sample_user()
    message = sample_message()
    service_message = types.MessageService(
        id=48214, peer_id=peer, date=1_733_000_100, action=types.MessageActionHistoryClear()
    )
    dialog = types.Dialog(
        peer=peer,
        top_message=48213,
        read_inbox_max_id=48200,
        read_outbox_max_id=48213,
        unread_count=3,
        unread_mentions_count=0,
        unread_reactions_count=0,
        unread_poll_votes_count=0,
        notify_settings=types.PeerNotifySettings(show_previews=True, silent=False),
        pinned=True,
        pts=None,
        draft=types.DraftMessage(message="draft ✏️", date=1_733_000_200),
        folder_id=1,
    )
    config = types.Config(
        date=1_733_000_000,
        expires=1_733_003_600,
        test_mode=False,
        this_dc=2,
        dc_options=[
            types.DcOption(id=2, ip_address="127.0.0.1", port=8443),
            types.DcOption(id=2, ip_address="::1", port=8443, ipv6=True),
            types.DcOption(id=2, ip_address="10.0.0.2", port=443, media_only=True, cdn=False),
        ],
        dc_txt_domain_name="example.org",
        chat_size_max=200,
        megagroup_size_max=200_000,
        forwarded_count_max=100,
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
        caption_length_max=1_024,
        message_length_max=4_096,
        webfile_dc_id=2,
        suggested_lang_code="en",
        lang_pack_version=1,
        base_lang_pack_version=1,
        reactions_default=types.ReactionEmoji(emoticon="👍"),
    )
    entities: list[types.TypeMessageEntity] = [
        types.MessageEntityBold(offset=0, length=4),
        types.MessageEntityTextUrl(offset=5, length=4, url="https://example.org/ü"),
        types.MessageEntityMentionName(offset=10, length=5, user_id=5_000_000_042),
        types.MessageEntityPre(offset=16, length=3, language="python"),
        types.MessageEntityCustomEmoji(offset=20, length=2, document_id=-1),
    ]
    return {
        "message": message,
        "message_entities_reply_fwd": types.Message(
            id=7,
            peer_id=peer,
            from_id=types.PeerUser(user_id=5_000_000_042),
            date=1_700_000_000,
            message="Bold link name pre 👍 " + "long text " * 40,
            entities=entities,
            reply_to=types.MessageReplyHeader(
                reply_to_msg_id=6,
                quote=True,
                quote_text="quoted",
                quote_entities=[types.MessageEntityItalic(offset=0, length=6)],
                quote_offset=0,
            ),
            fwd_from=types.MessageFwdHeader(
                from_name="Hidden Sender",
                date=1_690_000_000,
                saved_from_peer=types.PeerChannel(channel_id=1_234_567_890),
                saved_from_msg_id=99,
                imported=True,
            ),
            views=10,
            forwards=2,
            media=types.MessageMediaEmpty(),
            silent=True,
        ),
        "message_service": service_message,
        "user": user,
        "user_self_bot": types.User(
            id=1,
            self_=True,
            bot=True,
            bot_info_version=3,
            first_name="Bot",
            username="helper_bot",
            bot_inline_placeholder="Search…",
            status=types.UserStatusRecently(),
            usernames=[types.Username(username="helper_bot", editable=True, active=True)],
        ),
        "dialog": dialog,
        "messages_dialogs": types.messages.Dialogs(
            dialogs=[dialog], messages=[message, service_message], chats=[], users=[user]
        ),
        "config": config,
        "updates": sample_updates(),
        "update_short_message": types.UpdateShortMessage(
            id=12,
            user_id=5_000_000_042,
            message="hi",
            pts=77,
            pts_count=1,
            date=1_733_000_000,
            out=True,
            entities=[types.MessageEntityCode(offset=0, length=2)],
        ),
        "updates_difference": types.updates.Difference(
            new_messages=[message],
            new_encrypted_messages=[],
            other_updates=[
                types.UpdateReadHistoryInbox(
                    peer=peer, max_id=5, still_unread_count=0, pts=9, pts_count=1
                )
            ],
            chats=[],
            users=[user],
            state=types.updates.State(pts=9, qts=0, date=1_733_000_000, seq=1, unread_count=0),
        ),
        "send_message_request": functions.messages.SendMessage(
            peer=types.InputPeerUser(user_id=5_000_000_042, access_hash=-1),
            message="hello",
            random_id=-4_611_686_018_427_387_904,
            no_webpage=True,
            entities=entities[:1],
        ),
        "invoke_with_layer_init_connection": functions.InvokeWithLayer(
            layer=229,
            query=functions.InitConnection(
                api_id=4,
                device_model="PC",
                system_version="Linux",
                app_version="1.0",
                system_lang_code="en",
                lang_pack="",
                lang_code="en",
                query=functions.help.GetConfig(),
            ),
        ),
        "res_pq": mt.ResPQ(
            nonce=-(2**127),
            server_nonce=2**127 - 1,
            pq=b"\x17\xed\x48\x94\x1a\x08\xf9\x81",
            server_public_key_fingerprints=[-3_414_540_481_677_951_611],
        ),
        "future_salts": mt.FutureSalts(
            req_msg_id=1,
            now=2,
            salts=[mt.FutureSalt(valid_since=1, valid_until=2, salt=3)],
        ),
        "rpc_error": mt.RpcError(error_code=420, error_message="FLOOD_WAIT_30"),
    }


REALISTIC = realistic_corpus()


@pytest.mark.parametrize("name", sorted(REALISTIC))
def test_realistic_objects_are_byte_exact(name: str) -> None:
    check_exact(REALISTIC[name])


def test_hard_coded_message_vector() -> None:
    # Pinned once from Telethon 1.45, so a change in either codec shows up here too.
    msg = types.Message(id=1, peer_id=types.PeerUser(user_id=2), date=3, message="x")
    assert msg.to_bytes().hex() == (
        "d3b900760000000000000000010000002217515902000000000000000300000001780000"
    )


def _telethon_container(items: list[service.ContainerItem]) -> bytes:
    """A msg_container as Telethon's client writes one (MessagePacker's layout)."""
    state = MTProtoState(None, loggers={"telethon.network.mtprotostate": None})
    ids = iter([i.msg_id for i in items])
    state._get_new_msg_id = lambda: next(ids)
    buffer = io.BytesIO()
    for item in items:
        state._sequence = item.seq_no // 2  # content-related: seq_no = 2 * n + 1
        state.write_data_as_message(buffer, item.body, content_related=bool(item.seq_no & 1))
    return struct.pack("<Ii", MessageContainer.CONSTRUCTOR_ID, len(items)) + buffer.getvalue()


def test_msg_container_matches_telethon() -> None:
    items = [
        service.ContainerItem(7_300_000_000_000_000_001, 1, functions.help.GetConfig().to_bytes()),
        service.ContainerItem(7_300_000_000_000_000_005, 2, mt.MsgsAck(msg_ids=[1, 2]).to_bytes()),
        service.ContainerItem(
            7_300_000_000_000_000_009, 3, REALISTIC["send_message_request"].to_bytes()
        ),
    ]
    ours = service.encode_container(items)
    assert ours == _telethon_container(items)
    assert service.decode_container(ours) == items
    parsed = BinaryReader(ours).tgread_object()
    assert isinstance(parsed, MessageContainer)
    assert [(m.msg_id, m.seq_no, bytes(m.obj)) for m in parsed.messages] == [
        (i.msg_id, i.seq_no, i.body) for i in items
    ]


def test_gzip_packed_interoperates_with_telethon() -> None:
    body = sample_updates().to_bytes()
    ours = service.gzip_packed(body)
    assert GzipPacked.read(BinaryReader(ours)) == body
    theirs = bytes(GzipPacked(body))
    assert service.unwrap_gzip(theirs) == body
    assert decode(theirs) == sample_updates()


def test_rpc_result_and_error_as_telethon_reads_them() -> None:
    result = service.encode_rpc_result(123, REALISTIC["config"].to_bytes())
    reader = BinaryReader(result)
    assert reader.read_int(signed=False) == RpcResult.CONSTRUCTOR_ID
    parsed = RpcResult.from_reader(reader)
    assert parsed.req_msg_id == 123 and parsed.error is None
    assert parsed.body == REALISTIC["config"].to_bytes()

    error = service.encode_rpc_error(456, 400, "MESSAGE_TOO_LONG")
    assert error[12:] == bytes(tt.RpcError(400, "MESSAGE_TOO_LONG"))
    reader = BinaryReader(error)
    reader.read_int(signed=False)
    parsed = RpcResult.from_reader(reader)
    assert parsed.req_msg_id == 456
    assert (parsed.error.error_code, parsed.error.error_message) == (400, "MESSAGE_TOO_LONG")


def test_quirk_combinators_agree_on_valid_values() -> None:
    # Telethon packs this id unsigned; for every real (positive) message id it is the same.
    req = functions.channels.GetMessageAuthor(
        channel=types.InputChannel(channel_id=5, access_hash=6), id=7
    )
    check_exact(req)


def test_bench_tl_command_prints_table_then_json() -> None:
    import json

    from click.testing import CliRunner

    from telesrv.bench.tl import command

    result = CliRunner().invoke(command, ["--number", "20", "--repeat", "1"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split()[:2] == ["object", "op"]
    figures = json.loads(lines[-1])
    for name in ("message", "updates"):
        for op in ("serialize", "parse"):
            assert figures[f"{name}_{op}_speedup"] > 0
            assert figures[f"{name}_{op}_ours_us"] > 0
            assert figures[f"{name}_{op}_telethon_us"] > 0
        for layer in (133, 198, 213):
            for op in (f"downgrade_{layer}", f"push_{layer}"):
                assert figures[f"{name}_{op}_us"] > 0
                assert figures[f"{name}_{op}_cost"] > 0
