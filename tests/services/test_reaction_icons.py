"""The server's reaction icons: one still WebP per reaction; ids that follow the emoticon
and the bytes (the same in every process that draws the same picture, different where
the picture differs); found only by id and access hash together."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image, ImageFont

from telesrv.rpc.reactions import icon_attributes
from telesrv.services.reaction_icons import ICON_SIZE, MIME_TYPE, ReactionIcons, draw_icon
from telesrv.services.reactions import AVAILABLE_REACTIONS


def icons(font_paths: tuple[str, ...] = ()) -> ReactionIcons:
    return ReactionIcons(AVAILABLE_REACTIONS, icon_attributes, font_paths=font_paths)


async def test_every_reaction_has_a_distinct_decodable_icon() -> None:
    catalogue = icons()
    rows = [await catalogue.document(e) for e in AVAILABLE_REACTIONS]
    assert len({r.id for r in rows}) == len(AVAILABLE_REACTIONS)
    assert all(0 < r.id < 2**63 for r in rows)
    for emoticon, row in zip(AVAILABLE_REACTIONS, rows, strict=True):
        icon = await catalogue.find(row.id, row.access_hash)
        assert icon is not None and icon.emoticon == emoticon
        assert row.size == len(icon.data) and row.mime_type == MIME_TYPE
        assert row.attributes == icon_attributes(emoticon)
        image = Image.open(io.BytesIO(icon.data))
        assert image.format == "WEBP" and image.size == (ICON_SIZE, ICON_SIZE)


def test_without_an_emoji_font_each_reaction_still_looks_different() -> None:
    assert draw_icon("👍", None) != draw_icon("👎", None)


async def test_same_picture_same_document_in_another_process() -> None:
    # Another process builds its own catalogue: what one lists, the other serves.
    one, two = icons(), icons()
    for emoticon in AVAILABLE_REACTIONS:
        a, b = await one.document(emoticon), await two.document(emoticon)
        assert (a.id, a.access_hash, a.file_reference, a.size) == (
            b.id,
            b.access_hash,
            b.file_reference,
            b.size,
        )
        assert await two.find(a.id, a.access_hash) is not None


async def test_another_picture_is_another_document(tmp_path: Path) -> None:
    # A process that draws with a font lists documents the one without cannot serve
    # under the same ids (so none gets bytes of another size than it was told).
    font = ImageFont.load_default(size=109)
    assert isinstance(font, ImageFont.FreeTypeFont)
    with_font = ReactionIcons(["W"], icon_attributes, font_paths=())
    plain = await with_font.document("W")
    drawn = ReactionIcons(["W"], icon_attributes, font_paths=(str(_font_file(font, tmp_path)),))
    glyph = await drawn.document("W")
    assert glyph.size != plain.size
    assert glyph.id != plain.id and glyph.access_hash != plain.access_hash
    assert await with_font.find(glyph.id, glyph.access_hash) is None


def _font_file(font: ImageFont.FreeTypeFont, tmp_path: Path) -> Path:
    path = Path(str(font.path)) if isinstance(font.path, str) else tmp_path / "font.ttf"
    if not isinstance(font.path, str):
        assert isinstance(font.path, io.BytesIO)
        path.write_bytes(font.path.getvalue())  # Pillow's own font lives in memory
    return path


async def test_found_only_with_its_access_hash() -> None:
    catalogue = icons()
    row = await catalogue.document("👍")
    assert await catalogue.find(row.id, row.access_hash ^ 1) is None
    assert await catalogue.find(row.id ^ 1, row.access_hash) is None


async def test_a_font_that_cannot_be_read_falls_back(tmp_path: Path) -> None:
    broken = tmp_path / "broken.ttf"
    broken.write_bytes(b"not a font")
    catalogue = ReactionIcons(["👍"], icon_attributes, font_paths=(str(broken),))
    assert (await catalogue.document("👍")).size == len(draw_icon("👍", None))


def test_a_glyph_is_cropped_and_scaled_to_fill_the_icon() -> None:
    # Any outline font takes the glyph path; Pillow's own stands in for an emoji font.
    font = ImageFont.load_default(size=109)
    assert isinstance(font, ImageFont.FreeTypeFont)
    data = draw_icon("W", font)
    assert data != draw_icon("W", None)
    image = Image.open(io.BytesIO(data)).convert("RGBA")
    assert image.size == (ICON_SIZE, ICON_SIZE)
    box = image.getbbox()
    assert box is not None
    # The longer side of the glyph spans the icon; the shorter is centred.
    width, height = box[2] - box[0], box[3] - box[1]
    assert max(width, height) >= ICON_SIZE - 2
    assert abs(box[0] - (ICON_SIZE - box[2])) <= 2 and abs(box[1] - (ICON_SIZE - box[3])) <= 2
