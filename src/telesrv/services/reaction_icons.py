"""Reaction icons: the small still images apps draw for each reaction.

Apps show a reaction with the documents its entry in the available-reactions list names;
an entry without them leaves some apps waiting for a document that never comes (Web K's
message menu never opens). The server makes one image per reaction, once per process,
and serves it from memory to anyone: it belongs to no user and holds nothing private.

A document's ids derive from its emoticon and its bytes: processes that draw the same
picture list the same document and serve it for one another; one that draws another
(another font, or none) lists another document.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from telesrv.store.files import DC_ID, DocumentRow

log = logging.getLogger(__name__)

ICON_SIZE = 100  # pixels each side, what apps lay a reaction out in
ICONS_DATE = 1_704_067_200  # a fixed date, so that every process lists the same document
MIME_TYPE = "image/webp"
# A color emoji font, where the system has one: its glyphs are bitmaps at one size.
FONT_PATHS = (
    "/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf",
    "/usr/share/fonts/noto/NotoColorEmoji.ttf",
)
_FONT_PIXELS = 109
_CANVAS = 160  # drawn larger, then cropped to the glyph and scaled to ICON_SIZE


@dataclass(frozen=True, slots=True)
class Icon:
    emoticon: str
    row: DocumentRow
    data: bytes


def _derived(emoticon: str, purpose: bytes, n: int) -> bytes:
    seed = b"telesrv reaction icon\0" + purpose + b"\0" + emoticon.encode()
    return hashlib.sha256(seed).digest()[:n]


def _signed64(raw: bytes) -> int:
    return int.from_bytes(raw, "big", signed=True)


def _emoji_font(paths: Sequence[str]) -> ImageFont.FreeTypeFont | None:
    for path in paths:
        if os.path.exists(path):
            try:
                return ImageFont.truetype(path, _FONT_PIXELS)
            except OSError:
                log.warning("reaction icons: cannot load the emoji font %s", path)
    return None


def _glyph(emoticon: str, font: ImageFont.FreeTypeFont) -> Image.Image | None:
    canvas = Image.new("RGBA", (_CANVAS, _CANVAS), (0, 0, 0, 0))
    ImageDraw.Draw(canvas).text(
        (_CANVAS // 2, _CANVAS // 2), emoticon, font=font, anchor="mm", embedded_color=True
    )
    box = canvas.getbbox()
    if box is None:
        return None  # the font has no glyph for it
    return canvas.crop(box)


def _disc(emoticon: str) -> Image.Image:
    # Without an emoji font: a disc in a colour of its own per reaction, so that
    # different reactions still look different.
    hue = zlib.crc32(emoticon.encode())
    colour = (64 + hue % 160, 64 + (hue >> 8) % 160, 64 + (hue >> 16) % 160, 255)
    image = Image.new("RGBA", (ICON_SIZE, ICON_SIZE), (0, 0, 0, 0))
    ImageDraw.Draw(image).ellipse((8, 8, ICON_SIZE - 8, ICON_SIZE - 8), fill=colour)
    return image


def draw_icon(emoticon: str, font: ImageFont.FreeTypeFont | None) -> bytes:
    """The icon of one reaction as a lossless WebP of ICON_SIZE x ICON_SIZE."""
    glyph = _glyph(emoticon, font) if font is not None else None
    if glyph is None:
        image = _disc(emoticon)
    else:
        scale = ICON_SIZE / max(glyph.size)
        glyph = glyph.resize(
            (max(1, round(glyph.width * scale)), max(1, round(glyph.height * scale))),
            Image.Resampling.LANCZOS,
        )
        image = Image.new("RGBA", (ICON_SIZE, ICON_SIZE), (0, 0, 0, 0))
        image.paste(glyph, ((ICON_SIZE - glyph.width) // 2, (ICON_SIZE - glyph.height) // 2))
    out = io.BytesIO()
    image.save(out, "WEBP", lossless=True, exact=True)
    return out.getvalue()


# The serialized attributes of an icon's document, by its emoticon (made where TL is).
Attributes = Callable[[str], list[bytes]]


def _icon(emoticon: str, data: bytes, attributes: Attributes) -> Icon:
    # The ids come from the emoticon and the bytes together: a process that draws
    # another picture (another font, or none) lists another document, never the same
    # one with other bytes.
    seed = emoticon + "\0" + hashlib.sha256(data).hexdigest()
    row = DocumentRow(
        # A positive 63-bit id, as uploaded documents have; distinct from theirs but
        # for a chance of one in 2**63 per pair.
        id=int.from_bytes(_derived(seed, b"id", 8), "big") >> 1 or 1,
        access_hash=_signed64(_derived(seed, b"access", 8)),
        file_reference=_derived(seed, b"reference", 16),
        owner_user_id=0,
        date=ICONS_DATE,
        dc_id=DC_ID,
        mime_type=MIME_TYPE,
        size=len(data),
        blob="",
        attributes=attributes(emoticon),
        thumbs=[],
        stripped=None,
    )
    return Icon(emoticon, row, data)


def _draw_all(emoticons: Sequence[str], font_paths: Sequence[str]) -> dict[str, bytes]:
    font = _emoji_font(font_paths)
    if font is None:
        log.info("reaction icons: no emoji font found; each reaction gets a plain disc")
    drawn = {}
    for emoticon in emoticons:
        try:
            drawn[emoticon] = draw_icon(emoticon, font)
        except Exception:  # one glyph the font or the encoder cannot take
            log.warning("reaction icons: cannot draw %r; a plain disc instead", emoticon)
            drawn[emoticon] = draw_icon(emoticon, None)
    return drawn


class ReactionIcons:
    """One icon per reaction, drawn once per process (off the event loop: with an
    emoji font it takes most of a second) at the first use, and kept."""

    def __init__(
        self,
        emoticons: Sequence[str],
        attributes: Attributes,
        font_paths: Sequence[str] = FONT_PATHS,
    ) -> None:
        self._emoticons = tuple(emoticons)
        self._attributes = attributes
        self._font_paths = tuple(font_paths)
        self._by_emoticon: dict[str, Icon] = {}
        self._by_id: dict[int, Icon] = {}
        self._drawing = asyncio.Lock()

    async def _ready(self) -> None:
        if self._by_emoticon:
            return
        async with self._drawing:
            if self._by_emoticon:
                return
            drawn = await asyncio.to_thread(_draw_all, self._emoticons, self._font_paths)
            icons = [_icon(e, data, self._attributes) for e, data in drawn.items()]
            # Both tables at once: a lookup sees all the icons or none.
            self._by_id = {i.row.id: i for i in icons}
            self._by_emoticon = {i.emoticon: i for i in icons}

    async def document(self, emoticon: str) -> DocumentRow:
        """The icon document of a reaction the server offers."""
        await self._ready()
        return self._by_emoticon[emoticon].row

    async def find(self, document_id: int, access_hash: int) -> Icon | None:
        """The icon a document reference names, None when it names none."""
        await self._ready()
        icon = self._by_id.get(document_id)
        if icon is None or icon.row.access_hash != access_hash:
            return None
        return icon
